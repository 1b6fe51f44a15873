import { Effect } from "effect"
import type { EmbeddingKind } from "../../domain/Embeddings.js"
import type { Vectors } from "./Vectors.js"
import { fromBytes } from "./Vectors.js"

/** One user's vectors of one kind, in memory: contiguous unit-length float32 rows. */
interface Slab {
  dim: number
  count: number
  data: Float32Array
  ids: Array<string>
  entities: Array<string | null>
  lastSeq: number
}

/** A nearest neighbour: the item and its cosine similarity to the query. */
export interface Neighbour {
  readonly id: string
  readonly similarity: number
}

/**
 * Exact nearest neighbours over vectors held in memory (docs/architecture.md, "Dense retrieval": why exact,
 * and up to what size). Each daemon keeps, per user and kind, the vectors in one contiguous Float32Array;
 * before a scan it reads the rows written since the last `seq` it holds (an index seek that returns nothing
 * when nothing changed), so what another daemon's feed wrote is found too. The scan is a dot product per
 * row (the vectors are unit length: the cosine) keeping the best `limit` in a small sorted array; rows of
 * entities outside the caller's scope are skipped before their product is taken.
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
        s = { dim: first.length, count: 0, data: new Float32Array(first.length * Math.max(64, rows.length)), ids: [], entities: [], lastSeq: 0 }
        slabs.set(key, s)
      }
      const needed = (s.count + rows.length) * s.dim
      if (needed > s.data.length) {
        const grown = new Float32Array(Math.max(needed, s.data.length * 2))
        grown.set(s.data.subarray(0, s.count * s.dim))
        s.data = grown
      }
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

  /**
   * The user's `limit` items of `kind` nearest to `query` (unit length), best first; only items of entities
   * in `scope` when one is given (undefined = no scope; empty = nothing).
   */
  const nearest = (
    userId: string,
    kind: EmbeddingKind,
    query: Float32Array,
    limit: number,
    scope: ReadonlyArray<string> | undefined
  ) =>
    Effect.map(refresh(userId, kind), (slab): Array<Neighbour> => {
      if (slab === undefined || slab.dim !== query.length || limit <= 0) return []
      if (scope !== undefined && scope.length === 0) return []
      const allowed = scope === undefined ? undefined : new Set(scope)
      const { count, data, dim, entities } = slab
      const bestScore: Array<number> = []
      const bestRow: Array<number> = []
      for (let row = 0; row < count; row++) {
        if (allowed !== undefined) {
          const entity = entities[row]
          if (entity === null || !allowed.has(entity)) continue
        }
        let dot = 0
        const base = row * dim
        for (let i = 0; i < dim; i++) dot += data[base + i] * query[i]
        if (bestScore.length === limit && dot <= bestScore[limit - 1]) continue
        let at = bestScore.length
        while (at > 0 && bestScore[at - 1] < dot) at--
        bestScore.splice(at, 0, dot)
        bestRow.splice(at, 0, row)
        if (bestScore.length > limit) {
          bestScore.pop()
          bestRow.pop()
        }
      }
      return bestRow.map((row, i) => ({ id: slab.ids[row], similarity: bestScore[i] }))
    })

  /** How many vectors this daemon holds in memory (all users and kinds). */
  const held = () => {
    let n = 0
    for (const slab of slabs.values()) n += slab.count
    return n
  }

  return { nearest, held } as const
}
