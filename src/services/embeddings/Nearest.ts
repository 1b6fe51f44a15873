import { Effect } from "effect"
import type { EmbeddingKind } from "../../domain/Embeddings.js"
import type { WasmMemory } from "./Simd.js"
import { memoryOf, scanner } from "./Simd.js"
import type { Vectors } from "./Vectors.js"
import { fromBytes } from "./Vectors.js"

const PAGE = 65536

/**
 * One user's vectors of one kind, in memory: contiguous unit-length float32 rows in a WebAssembly memory
 * (rows at byte 0; while scanning, the query and the scores after the last row's room).
 */
interface Slab {
  dim: number
  count: number
  capacity: number
  memory: WasmMemory
  data: Float32Array
  scan: ((data: number, count: number, dim: number, query: number, out: number) => void) | undefined
  ids: Array<string>
  entities: Array<string | null>
  lastSeq: number
  /** the rows quantized to int8 (each scaled by its largest component: `scales`), in a memory of their own */
  memory8: WasmMemory
  data8: Int8Array
  scales: Float32Array
  scan8: ((data: number, count: number, dim: number, query: number, out: number) => void) | undefined
}

/**
 * Up to this many vectors of a user and kind, a search scans their float32 values (exact); past it, their int8
 * quantization first, and re-ranks the best `RESCORED × limit` (at least `RESCORED_MIN`) by their exact cosine.
 * Chosen by measurement (bench/search.bench.ts; docs/architecture.md, "Search and dense retrieval").
 */
export const EXACT_UP_TO = 20_000
const RESCORED = 5
const RESCORED_MIN = 50

/** How a search scans: `auto` (exact up to `EXACT_UP_TO`, then quantized and re-ranked), or forced (the bench compares them). */
export type ScanMethod = "auto" | "exact" | "quantized"

const dotAt = (data: Float32Array, base: number, query: Float32Array, width: number) => {
  let dot = 0
  for (let i = 0; i < width; i++) dot += data[base + i] * query[i]
  return dot
}

/** Keeps the best `limit` (row, score) pairs offered, best first. */
const topK = (limit: number) => {
  const scores: Array<number> = []
  const rows: Array<number> = []
  const offer = (row: number, score: number) => {
    if (scores.length === limit && score <= scores[limit - 1]) return
    let at = scores.length
    while (at > 0 && scores[at - 1] < score) at--
    scores.splice(at, 0, score)
    rows.splice(at, 0, row)
    if (scores.length > limit) {
      scores.pop()
      rows.pop()
    }
  }
  /** What a score must beat to be kept. */
  const floor = () => scores.length === limit ? scores[limit - 1] : -Infinity
  return { offer, floor, scores, rows }
}

/** Room for `rows` rows (the memories grow; their views are made again). */
const reserve = (slab: Slab, rows: number) => {
  if (rows <= slab.capacity) return
  const capacity = Math.max(rows, slab.capacity * 2)
  const grow = (memory: WasmMemory, bytes: number) => {
    const pages = Math.ceil(bytes / PAGE) - memory.buffer.byteLength / PAGE
    if (pages > 0) memory.grow(pages)
  }
  // floats: the rows, then the query and the scores; int8: the rows, the query, then int32 scores (aligned)
  grow(slab.memory, (capacity * slab.dim + slab.dim + capacity) * 4)
  grow(slab.memory8, capacity * slab.dim + slab.dim + 16 + capacity * 4)
  slab.capacity = capacity
  slab.data = new Float32Array(slab.memory.buffer, 0, capacity * slab.dim)
  slab.data8 = new Int8Array(slab.memory8.buffer, 0, capacity * slab.dim)
  const scales = new Float32Array(capacity)
  scales.set(slab.scales.subarray(0, slab.count))
  slab.scales = scales
}

const newSlab = (dim: number): Slab => {
  const memory = memoryOf(1)
  const memory8 = memoryOf(1)
  const slab: Slab = {
    dim,
    count: 0,
    capacity: 0,
    memory,
    data: new Float32Array(0),
    scan: scanner(memory, dim, "f32"),
    ids: [],
    entities: [],
    lastSeq: 0,
    memory8,
    data8: new Int8Array(0),
    scales: new Float32Array(0),
    scan8: scanner(memory8, dim, "i8")
  }
  reserve(slab, 64)
  return slab
}

/** A vector's int8 values into `into` at `at` (each component over its largest, × 127); returns the scale. */
const quantize = (v: Float32Array, into: Int8Array, at: number): number => {
  let max = 0
  for (let i = 0; i < v.length; i++) max = Math.max(max, Math.abs(v[i]))
  const scale = max === 0 ? 0 : max / 127
  for (let i = 0; i < v.length; i++) into[at + i] = scale === 0 ? 0 : Math.round(v[i] / scale)
  return scale
}

/**
 * Nearest neighbours over vectors held in memory (docs/architecture.md, "Search and dense retrieval"). Each
 * daemon keeps, per user and kind, the vectors in contiguous blocks: float32, and int8 (each row scaled by its
 * largest component). Before a scan it reads the rows written since the last `seq` it holds (an index seek that
 * returns nothing when nothing changed), so what another daemon's feed wrote is found too. Up to `EXACT_UP_TO`
 * rows the scan is exact: the dot product of every float32 row with the query (unit vectors: the cosine) in
 * WebAssembly SIMD (`Simd.ts`; a JavaScript loop where it cannot run). Past it, the int8 rows are scanned
 * against the quantized query (a quarter of the bytes), each product times its row's scale, and the best
 * `max(50, 5 × limit)` are re-ranked by their exact float32 cosine. Only rows of entities in the caller's scope
 * are ever candidates.
 */
export const makeNearest = (vectors: Vectors) => {
  const slabs = new Map<string, Slab>()

  const refresh = (userId: string, kind: EmbeddingKind) =>
    Effect.gen(function*() {
      const key = `${userId}\u0000${kind}`
      const slab = slabs.get(key)
      const rows = yield* vectors.newer(userId, kind, slab?.lastSeq ?? 0)
      if (rows.length === 0) return slab
      const first = fromBytes(rows[0][3] as Uint8Array)
      let s = slab
      if (s === undefined || s.dim !== first.length) {
        s = newSlab(first.length)
        slabs.set(key, s)
      }
      reserve(s, s.count + rows.length)
      for (const [seq, itemId, entityId, bytes] of rows) {
        // (two scans refreshing at once read the same rows: the second finds them held)
        if (Number(seq) <= s.lastSeq) continue
        s.lastSeq = Number(seq)
        const v = fromBytes(bytes as Uint8Array)
        if (v.length !== s.dim) continue // another dimension (the model's vectors changed shape): skipped
        s.data.set(v, s.count * s.dim)
        s.scales[s.count] = quantize(v, s.data8, s.count * s.dim)
        s.ids.push(String(itemId))
        s.entities.push(entityId === null ? null : String(entityId))
        s.count++
      }
      return s
    })

  /** Every row's int8 dot product with the quantized query (to be multiplied by the row's scale). */
  const roughDots = (slab: Slab, query: Float32Array): Int32Array => {
    const queryAt = slab.capacity * slab.dim
    const outAt = Math.ceil((queryAt + slab.dim) / 16) * 16
    const q8 = new Int8Array(slab.memory8.buffer, queryAt, slab.dim)
    quantize(query, q8, 0)
    if (slab.scan8 !== undefined) {
      slab.scan8(0, slab.count, slab.dim, queryAt, outAt)
      return new Int32Array(slab.memory8.buffer, outAt, slab.count)
    }
    const dots = new Int32Array(slab.count)
    for (let row = 0; row < slab.count; row++) {
      let dot = 0
      const base = row * slab.dim
      for (let i = 0; i < slab.dim; i++) dot += slab.data8[base + i] * q8[i]
      dots[row] = dot
    }
    return dots
  }

  /** Every row's dot product with the query. */
  const scores = (slab: Slab, query: Float32Array): Float32Array => {
    const queryAt = slab.capacity * slab.dim
    const outAt = queryAt + slab.dim
    const out = new Float32Array(slab.memory.buffer, outAt * 4, slab.count)
    if (slab.scan !== undefined) {
      new Float32Array(slab.memory.buffer, queryAt * 4, slab.dim).set(query)
      slab.scan(0, slab.count, slab.dim, queryAt * 4, outAt * 4)
    } else {
      for (let row = 0; row < slab.count; row++) out[row] = dotAt(slab.data, row * slab.dim, query, slab.dim)
    }
    return out
  }

  /**
   * The user's `limit` items of `kind` nearest to `query` (unit length), best first; only items of entities
   * in `scope` when one is given (undefined = no scope; empty = nothing).
   */
  const nearest = (
    userId: string,
    kind: EmbeddingKind,
    query: Float32Array,
    limit: number,
    scope: ReadonlyArray<string> | undefined,
    method: ScanMethod = "auto"
  ) =>
    Effect.map(refresh(userId, kind), (slab) => {
      if (slab === undefined || slab.dim !== query.length || limit <= 0) return []
      if (scope !== undefined && scope.length === 0) return []
      const allowedSet = scope === undefined ? undefined : new Set(scope)
      const allowed = (row: number) => {
        if (allowedSet === undefined) return true
        const entity = slab.entities[row]
        return entity !== null && allowedSet.has(entity)
      }
      const best = topK(limit)
      // (a row no better than the worst kept is skipped before its scope is looked at)
      if (method === "exact" || (method === "auto" && slab.count <= EXACT_UP_TO)) {
        const all = scores(slab, query)
        for (let row = 0; row < slab.count; row++) {
          const score = all[row]
          if (score > best.floor() && allowed(row)) best.offer(row, score)
        }
      } else {
        const dots = roughDots(slab, query)
        const scales = slab.scales
        const candidates = topK(Math.max(RESCORED_MIN, RESCORED * limit))
        for (let row = 0; row < slab.count; row++) {
          const rough = dots[row] * scales[row]
          if (rough > candidates.floor() && allowed(row)) candidates.offer(row, rough)
        }
        for (const row of candidates.rows) best.offer(row, dotAt(slab.data, row * slab.dim, query, slab.dim))
      }
      return best.rows.map((row, i) => ({ id: slab.ids[row], similarity: best.scores[i] }))
    })

  /** How many vectors this daemon holds in memory (all users and kinds). */
  const held = () => {
    let n = 0
    for (const slab of slabs.values()) n += slab.count
    return n
  }

  return { nearest, held } as const
}
