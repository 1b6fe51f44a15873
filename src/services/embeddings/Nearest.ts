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
  /** the rows projected to `PROJECTED` dimensions (the first `projected`), once the slab outgrew the exact scan */
  proj: Float32Array
  projected: number
}

/**
 * Up to this many vectors of a user and kind, a search scans them all (exact); past it, it scans their
 * projections first and re-ranks the best candidates exactly. Chosen by measurement (bench/search.bench.ts;
 * docs/architecture.md, "Dense retrieval"): the exact SIMD scan costs ~0.1 ms per 1,000 vectors of 384
 * dimensions, so 200,000 stay near 20 ms a kind.
 */
export const EXACT_UP_TO = 200_000
/** The projected dimensions (a fixed random Gaussian projection: inner products kept in expectation). */
export const PROJECTED = 48
/** Candidates re-ranked exactly: this many per result asked, at least `CANDIDATES_MIN`. */
const CANDIDATES_PER_RESULT = 100
const CANDIDATES_MIN = 2_000

/** How a search scans: `auto` (exact up to `EXACT_UP_TO`), or forced (the bench compares them). */
export type ScanMethod = "auto" | "exact" | "projected"

/** The projection of a dimension: PROJECTED rows of `dim` N(0, 1/PROJECTED) values, seeded (the same in every daemon). */
const projections = new Map<number, Float32Array>()
const projectionOf = (dim: number): Float32Array => {
  let p = projections.get(dim)
  if (p !== undefined) return p
  p = new Float32Array(PROJECTED * dim)
  let seed = 0x9e3779b9 ^ dim
  const next = () => {
    seed ^= seed << 13
    seed ^= seed >>> 17
    seed ^= seed << 5
    return ((seed >>> 0) + 1) / 4294967297
  }
  const scale = 1 / Math.sqrt(PROJECTED)
  for (let i = 0; i < p.length; i++) p[i] = Math.sqrt(-2 * Math.log(next())) * Math.cos(2 * Math.PI * next()) * scale
  projections.set(dim, p)
  return p
}

const project = (p: Float32Array, dim: number, source: Float32Array, offset: number, into: Float32Array, at: number) => {
  for (let j = 0; j < PROJECTED; j++) {
    let dot = 0
    const base = j * dim
    for (let i = 0; i < dim; i++) dot += p[base + i] * source[offset + i]
    into[at + j] = dot
  }
}

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
  return { offer, scores, rows }
}

/** The k-th largest of `values` (reordered in place; quickselect), or -Infinity when there are fewer. */
const kthLargest = (values: Float32Array, k: number): number => {
  if (k > values.length) return -Infinity
  let lo = 0
  let hi = values.length - 1
  const target = k - 1
  while (lo < hi) {
    const pivot = values[(lo + hi) >> 1]
    let i = lo
    let j = hi
    while (i <= j) {
      while (values[i] > pivot) i++
      while (values[j] < pivot) j--
      if (i <= j) {
        const t = values[i]
        values[i] = values[j]
        values[j] = t
        i++
        j--
      }
    }
    if (target <= j) hi = j
    else if (target >= i) lo = i
    else break
  }
  return values[target]
}

/** Room for `rows` rows (the memory grows; its views are made again). */
const reserve = (slab: Slab, rows: number) => {
  if (rows <= slab.capacity) return
  const capacity = Math.max(rows, slab.capacity * 2)
  const bytes = (capacity * slab.dim + slab.dim + capacity) * 4
  const pages = Math.ceil(bytes / PAGE) - slab.memory.buffer.byteLength / PAGE
  if (pages > 0) slab.memory.grow(pages)
  slab.capacity = capacity
  slab.data = new Float32Array(slab.memory.buffer, 0, capacity * slab.dim)
}

const newSlab = (dim: number): Slab => {
  const memory = memoryOf(1)
  const slab: Slab = {
    dim,
    count: 0,
    capacity: 0,
    memory,
    data: new Float32Array(0),
    scan: scanner(memory, dim),
    ids: [],
    entities: [],
    lastSeq: 0,
    proj: new Float32Array(0),
    projected: 0
  }
  reserve(slab, 64)
  return slab
}

/**
 * Nearest neighbours over vectors held in memory (docs/architecture.md, "Dense retrieval": exact up to
 * `EXACT_UP_TO` vectors of a user and kind, then a projected prefilter re-ranked exactly — measured). Each
 * daemon keeps, per user and kind, the vectors in one contiguous block; before a scan it reads the rows
 * written since the last `seq` it holds (an index seek that returns nothing when nothing changed), so what
 * another daemon's feed wrote is found too. The exact scan takes the dot product of every row with the
 * query (unit vectors: the cosine) in WebAssembly SIMD (`Simd.ts`; a JavaScript loop where it cannot run)
 * and keeps the best `limit` of the rows in the caller's scope. Past `EXACT_UP_TO`, every row also has a
 * `PROJECTED`-dimension projection (a fixed random Gaussian matrix): the query's projection is scanned
 * against those, and the best `max(2000, 100 × limit)` candidates are re-ranked by their exact cosine.
 * Rows of entities outside the caller's scope are never candidates.
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
        s.ids.push(String(itemId))
        s.entities.push(entityId === null ? null : String(entityId))
        s.count++
      }
      return s
    })

  /** The slab's projections brought up to its rows (the first time it outgrows the exact scan: all of them). */
  const projectAll = (slab: Slab) => {
    if (slab.projected === slab.count) return
    if (slab.proj.length < slab.count * PROJECTED) {
      const grown = new Float32Array(Math.max(slab.count * PROJECTED, slab.proj.length * 2))
      grown.set(slab.proj.subarray(0, slab.projected * PROJECTED))
      slab.proj = grown
    }
    const p = projectionOf(slab.dim)
    for (let row = slab.projected; row < slab.count; row++) project(p, slab.dim, slab.data, row * slab.dim, slab.proj, row * PROJECTED)
    slab.projected = slab.count
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
      if (method === "exact" || (method === "auto" && slab.count <= EXACT_UP_TO)) {
        const all = scores(slab, query)
        for (let row = 0; row < slab.count; row++) if (allowed(row)) best.offer(row, all[row])
      } else {
        projectAll(slab)
        const q = new Float32Array(PROJECTED)
        project(projectionOf(slab.dim), slab.dim, query, 0, q, 0)
        const rough = new Float32Array(slab.count)
        for (let row = 0; row < slab.count; row++) rough[row] = allowed(row) ? dotAt(slab.proj, row * PROJECTED, q, PROJECTED) : -Infinity
        const floor = kthLargest(Float32Array.from(rough), Math.max(CANDIDATES_MIN, CANDIDATES_PER_RESULT * limit))
        for (let row = 0; row < slab.count; row++) {
          if (rough[row] >= floor && rough[row] > -Infinity) best.offer(row, dotAt(slab.data, row * slab.dim, query, slab.dim))
        }
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
