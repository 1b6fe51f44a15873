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
  /** its BM25 rank within its own kind (1 = best) */
  rank: Schema.Number,
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
  fusion: SearchFusion
})
export type SearchOutput = typeof SearchOutput.Type

/** A kind's hit before fusion, best first in its kind's list. */
export type KindHit = Omit<SearchItem, "score" | "rank">

/**
 * Reciprocal-rank fusion of ranked lists (each best first): score = Σ 1 / (k + rank) over the lists an
 * item appears in (here each item is in one list: its kind's). Ties keep the lists' order (documents,
 * facts, posts) and then the id, so the result is deterministic.
 */
export const fuseRrf = (lists: ReadonlyArray<ReadonlyArray<KindHit>>, k: number, limit: number): Array<SearchItem> => {
  const byKey = new Map<string, { item: SearchItem; order: number }>()
  lists.forEach((list, listIndex) =>
    list.forEach((hit, i) => {
      const key = `${hit.kind}:${hit.id}`
      const contribution = 1 / (k + i + 1)
      const seen = byKey.get(key)
      if (seen) seen.item = { ...seen.item, score: seen.item.score + contribution }
      else byKey.set(key, { item: { ...hit, score: contribution, rank: i + 1 }, order: listIndex })
    })
  )
  return [...byKey.values()]
    .sort((a, b) => b.item.score - a.item.score || a.order - b.order || (a.item.id < b.item.id ? -1 : a.item.id > b.item.id ? 1 : 0))
    .slice(0, limit)
    .map((x) => x.item)
}
