import { Config, Duration, Effect, Layer, Queue } from "effect"
import type { Caller } from "../domain/Auth.js"
import { LIMITS } from "../domain/Knowledge.js"
import type { KindHit, SearchInput, SearchKind, SearchOutput } from "../domain/Search.js"
import { fuseRrf, RRF_K, SEARCH_KINDS } from "../domain/Search.js"
import { Coordination } from "./Coordination.js"
import { Events } from "./Events.js"
import { Knowledge } from "./Knowledge.js"
import { spanned } from "./Spans.js"
import type { TextKind } from "./store/FullText.js"
import { makeFullText } from "./store/FullText.js"

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

    const search = spanned(
      "Search.search",
      Effect.fnUntraced(function*(caller: Caller, input: SearchInput) {
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
    )

    return { search } as const
  })
}) {}

const POSTS: ReadonlyArray<TextKind> = ["posts"]
const KNOWLEDGE: ReadonlyArray<TextKind> = ["documents", "facts"]

/**
 * The SQLite full-text indexes kept close behind the writes (store/FullText.ts, one mechanism for the three
 * kinds): the users whose posts landed (committed `PostLanded` events) or whose documents or facts changed
 * (committed `KnowledgeChanged` events) are collected for `SOPHIA_SEARCH_INDEX_DELAY_MS` (default
 * 250) after the first, then each is caught up in batches, by one fiber that lives as long as the app. At
 * start, once, whatever another process left unindexed. A failed batch is logged and retried with the next
 * write. A search does not depend on this fiber (it catches its user up itself, and may wait behind one of
 * its batches for the write lock). Nothing on Postgres.
 */
export const SearchIndexFeed = Layer.scopedDiscard(Effect.gen(function*() {
  const events = yield* Events
  const fullText = yield* makeFullText
  if (!fullText.batched) return
  const delay = yield* Config.integer("SOPHIA_SEARCH_INDEX_DELAY_MS").pipe(Config.withDefault(250), Effect.orDie)
  const due = yield* Queue.unbounded<{ readonly kinds: ReadonlyArray<TextKind>; readonly userId: string }>()
  const committed = yield* events.listen
  // posts by PostLanded, documents and facts by KnowledgeChanged: the committed writes that left index work
  yield* Queue.take(committed).pipe(
    Effect.flatMap((event) =>
      event._tag === "PostLanded"
        ? Queue.offer(due, { kinds: POSTS, userId: event.user_id })
        : event._tag === "KnowledgeChanged"
        ? Queue.offer(due, { kinds: KNOWLEDGE, userId: event.user_id })
        : Effect.void
    ),
    Effect.forever,
    Effect.forkScoped
  )
  const index = (kind: TextKind, users?: Iterable<string>) =>
    fullText.catchUpAll(kind, users).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning(`indexing ${kind} for search failed; retrying with the next write`, cause))
    )
  const batch = Effect.gen(function*() {
    const first = yield* Queue.take(due)
    yield* Effect.sleep(Duration.millis(delay))
    const users = new Map<TextKind, Set<string>>()
    for (const { kinds, userId } of [first, ...(yield* Queue.takeAll(due))]) {
      for (const kind of kinds) {
        const set = users.get(kind) ?? new Set<string>()
        users.set(kind, set.add(userId))
      }
    }
    for (const [kind, which] of users) yield* index(kind, which)
  })
  yield* Effect.forEach(["posts", "documents", "facts"] as const, (kind) => index(kind)).pipe(
    Effect.zipRight(Effect.forever(batch)),
    Effect.annotateLogs({ fiber: "search-index" }),
    Effect.forkScoped
  )
}))
