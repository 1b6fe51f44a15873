import { Schema } from "effect"
import { LIMITS } from "./Knowledge.js"

/**
 * `sophia.search`: one query over what the graph holds — documents, facts and posts the caller may see —
 * each kind ranked by BM25 in its own index, the lists fused by reciprocal-rank fusion. Posts are agent
 * chatter: every post hit says `grounding: false` (cite the primary source it references, never the post).
 */

export const SEARCH_KINDS = ["documents", "facts", "posts"] as const
export const SearchKind = Schema.Literal(...SEARCH_KINDS)
export type SearchKind = typeof SearchKind.Type

/** The RRF constant (Cormack et al.): a hit at rank r in one list scores 1 / (k + r). */
export const RRF_K = 60

export const SearchInput = Schema.Struct({
  query: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(LIMITS.termChars)).annotations({
    description: "words (any may match)"
  }),
  kinds: Schema.optional(Schema.Array(SearchKind)).annotations({ description: "default all three" }),
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, LIMITS.searchLimitMax))).annotations({ description: "default 10" })
})
export type SearchInput = typeof SearchInput.Type

/** One hit; the keys after `grounding` are the kind's own (absent on other kinds). */
export const SearchItem = Schema.Struct({
  kind: Schema.Literal("document", "fact", "post"),
  id: Schema.String,
  title: Schema.String,
  snippet: Schema.String,
  score: Schema.Number,
  /** false for posts: agent posts are never a grounding source */
  grounding: Schema.Boolean,
  /** its best rank within its own kind in the signals that found it (1 = best) */
  rank: Schema.Number,
  /** the signals that found it: "bm25" (its words), "dense" (its meaning) */
  signals: Schema.optional(Schema.Array(Schema.Literal("bm25", "dense"))),
  entity_id: Schema.optional(Schema.NullOr(Schema.String)),
  channel: Schema.optional(Schema.String),
  channel_seq: Schema.optional(Schema.Number),
  created_at: Schema.String
})
export type SearchItem = typeof SearchItem.Type
/** `compact: true` (≤ 6 keys). */
export const SEARCH_ITEM_COMPACT = ["kind", "id", "title", "snippet", "score", "grounding"] as const

export const SearchFusion = Schema.Struct({
  method: Schema.Literal("rrf"),
  k: Schema.Number,
  signals: Schema.Array(Schema.String)
})

export const SearchOutput = Schema.Struct({
  items: Schema.Array(SearchItem),
  /** hits found across the kinds searched (each kind contributes at most `limit`) */
  total: Schema.Number,
  fusion: SearchFusion,
  /** dense retrieval is configured but failed for this search (why): BM25 alone answered */
  degraded: Schema.optional(Schema.String)
})
export type SearchOutput = typeof SearchOutput.Type

/** A kind's hit before fusion, best first in its kind's list. */
export type KindHit = Omit<SearchItem, "score" | "rank" | "signals">

/** The signals a search fuses. */
export type Signal = "bm25" | "dense"

/** One ranked list before fusion: a signal's ids of one kind, best first (`ref`: what the owner needs to hydrate it). */
export interface RankedList {
  readonly kind: SearchKind
  readonly signal: Signal
  readonly ids: ReadonlyArray<{ readonly id: string; readonly ref: number }>
}

/** A fused id, before its row is read: its kind, score, best rank and the signals that found it. */
export interface FusedId {
  readonly kind: SearchKind
  readonly id: string
  /** the BM25 list's `ref` (an index row), or undefined when only dense found it */
  readonly ref: number | undefined
  readonly score: number
  readonly rank: number
  readonly signals: ReadonlyArray<Signal>
}

/**
 * Reciprocal-rank fusion of ids (each list best first): score = Σ 1 / (k + rank) over the lists an id is
 * in — a kind's BM25 list and its dense list. Ties keep the lists' order and then the id. Only the ids
 * are fused: the rows of the final page alone are read afterwards.
 */
export const fuseIds = (lists: ReadonlyArray<RankedList>, k: number, limit: number): Array<FusedId> => {
  const byKey = new Map<string, { fused: FusedId; order: number }>()
  lists.forEach((list, listIndex) =>
    list.ids.forEach(({ id, ref }, i) => {
      const key = `${list.kind}:${id}`
      const contribution = 1 / (k + i + 1)
      const seen = byKey.get(key)
      if (seen) {
        seen.fused = {
          ...seen.fused,
          score: seen.fused.score + contribution,
          rank: Math.min(seen.fused.rank, i + 1),
          ref: seen.fused.ref ?? (list.signal === "bm25" ? ref : undefined),
          signals: seen.fused.signals.includes(list.signal) ? seen.fused.signals : [...seen.fused.signals, list.signal]
        }
      } else {
        byKey.set(key, {
          fused: { kind: list.kind, id, ref: list.signal === "bm25" ? ref : undefined, score: contribution, rank: i + 1, signals: [list.signal] },
          order: listIndex
        })
      }
    })
  )
  return [...byKey.values()]
    .sort((a, b) => b.fused.score - a.fused.score || a.order - b.order || (a.fused.id < b.fused.id ? -1 : a.fused.id > b.fused.id ? 1 : 0))
    .slice(0, limit)
    .map((x) => x.fused)
}
