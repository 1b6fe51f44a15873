import { Effect } from "effect"
import type { Caller } from "../domain/Auth.js"
import { LIMITS } from "../domain/Knowledge.js"
import type { KindHit, SearchInput, SearchKind, SearchOutput } from "../domain/Search.js"
import { fuseRrf, RRF_K, SEARCH_KINDS } from "../domain/Search.js"
import { Coordination } from "./Coordination.js"
import { Knowledge } from "./Knowledge.js"

/**
 * The use case behind `sophia.search`: each kind is ranked by BM25 in the index of the service that owns
 * it (documents and facts by Knowledge, within the caller's entity scope; posts by Coordination), the
 * ranked lists are fused by reciprocal-rank fusion (k = 60). It owns no table.
 */
export class Search extends Effect.Service<Search>()("sophia/Search", {
  effect: Effect.gen(function*() {
    const knowledge = yield* Knowledge
    const coordination = yield* Coordination

    const ranked = (caller: Caller, kind: SearchKind, query: string, limit: number): Effect.Effect<ReadonlyArray<KindHit>> => {
      switch (kind) {
        case "documents":
          return Effect.map(knowledge.search(caller, { query, limit }), (r) =>
            r.items.map((d): KindHit => ({
              kind: "document",
              id: d.document_id,
              title: d.title,
              snippet: d.snippet,
              grounding: true,
              entity_id: d.entity_id,
              created_at: d.created_at
            })))
        case "facts":
          return Effect.map(knowledge.searchFacts(caller, query, limit), (rows) =>
            rows.map((f): KindHit => ({
              kind: "fact",
              id: f.fact_id,
              title: `${f.subject} ${f.predicate} ${f.object}`,
              snippet: f.snippet,
              grounding: true,
              entity_id: f.entity_id,
              created_at: f.created_at
            })))
        case "posts":
          return Effect.map(coordination.searchPosts(caller, query, limit), (rows) =>
            rows.map((p): KindHit => ({
              kind: "post",
              id: p.post_id,
              title: `post ${p.channel} #${p.channel_seq}`,
              snippet: p.snippet,
              grounding: false,
              channel: p.channel,
              channel_seq: p.channel_seq,
              created_at: p.created_at
            })))
      }
    }

    const search = Effect.fn("Search.search")(function*(caller: Caller, input: SearchInput) {
      const limit = input.limit ?? LIMITS.searchLimitDefault
      const kinds = input.kinds !== undefined && input.kinds.length > 0
        ? SEARCH_KINDS.filter((k) => input.kinds!.includes(k))
        : SEARCH_KINDS
      const lists = yield* Effect.forEach(kinds, (kind) => ranked(caller, kind, input.query, limit))
      const result: SearchOutput = {
        items: fuseRrf(lists, RRF_K, limit),
        total: lists.reduce((n, l) => n + l.length, 0),
        fusion: { method: "rrf", k: RRF_K, signals: ["bm25"] }
      }
      return result
    })

    return { search } as const
  })
}) {}
