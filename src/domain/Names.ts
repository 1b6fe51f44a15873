/** Edit distance, for "did you mean" suggestions on unknown tools, methods and fields. */
const distance = (a: string, b: string): number => {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const current = row[j]
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1))
      prev = current
    }
  }
  return row[b.length]
}

/** The `max` candidates closest to `name` (substring matches first), for refusals that suggest. */
export const nearest = (name: string, candidates: Iterable<string>, max = 3): Array<string> => {
  const lower = name.toLowerCase()
  return [...candidates]
    .map((c) => {
      const cl = c.toLowerCase()
      const contains = lower.length > 2 && (cl.includes(lower) || lower.includes(cl))
      return { c, score: distance(lower, cl) - (contains ? 100 : 0) }
    })
    .sort((x, y) => x.score - y.score || x.c.localeCompare(y.c))
    .slice(0, max)
    .map((x) => x.c)
}

/**
 * The one candidate `name` was most likely meant to be — a few edits away, or containing it — or undefined
 * when none is close (a suggestion that is a guess helps nobody).
 */
export const closest = (name: string, candidates: Iterable<string>): string | undefined => {
  const [best] = nearest(name, candidates, 1)
  if (best === undefined) return undefined
  const a = name.toLowerCase()
  const b = best.toLowerCase()
  const contains = a.length > 2 && (a.includes(b) || b.includes(a))
  return contains || distance(a, b) <= Math.max(2, Math.floor(b.length / 3)) ? best : undefined
}
