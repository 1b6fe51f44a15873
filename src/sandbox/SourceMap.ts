/**
 * Just enough of source maps (v3 `mappings`, base64 VLQ) to turn `snippet.js:LINE:COL` in an isolate's
 * stack into the agent's own `snippet.ts:LINE:COL`. esbuild reprints the code, so a fixed line offset
 * would drift; the map it emits is exact.
 */
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
const DIGIT = new Map([...B64].map((c, i) => [c, i]))

/** per generated line (0-based): segments `[generatedColumn, sourceLine, sourceColumn]`, all 0-based */
export type DecodedMappings = ReadonlyArray<ReadonlyArray<readonly [number, number, number]>>

const decodeVlq = (segment: string): Array<number> => {
  const out: Array<number> = []
  let value = 0
  let shift = 0
  for (const c of segment) {
    const digit = DIGIT.get(c)
    if (digit === undefined) return out
    value += (digit & 31) << shift
    if (digit & 32) {
      shift += 5
    } else {
      out.push(value & 1 ? -(value >>> 1) : value >>> 1)
      value = 0
      shift = 0
    }
  }
  return out
}

export const decodeMappings = (mappings: string): DecodedMappings => {
  let sourceLine = 0
  let sourceColumn = 0
  return mappings.split(";").map((line) => {
    let column = 0
    const segments: Array<readonly [number, number, number]> = []
    for (const raw of line.split(",")) {
      if (raw === "") continue
      const fields = decodeVlq(raw)
      column += fields[0] ?? 0
      if (fields.length >= 4) {
        sourceLine += fields[2]
        sourceColumn += fields[3]
        segments.push([column, sourceLine, sourceColumn])
      }
    }
    return segments
  })
}

/** The original (0-based) position of a generated (1-based, as in stack traces) position, if mapped. */
export const originalPosition = (
  decoded: DecodedMappings,
  line: number,
  column: number
): { readonly line: number; readonly column: number } | undefined => {
  const segments = decoded[line - 1]
  if (!segments || segments.length === 0) return undefined
  let best = segments[0]
  for (const s of segments) {
    if (s[0] <= column - 1) best = s
    else break
  }
  return { line: best[1], column: best[2] }
}
