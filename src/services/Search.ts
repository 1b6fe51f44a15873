import { SqlClient } from "@effect/sql"
import { Config, Duration, Effect, Either, Layer, Queue } from "effect"
import type { Caller } from "../domain/Auth.js"
import { LIMITS } from "../domain/Knowledge.js"
import type { FusedId, KindHit, RankedList, SearchInput, SearchItem, SearchKind, SearchOutput } from "../domain/Search.js"
import { fuseIds, RRF_K, SEARCH_KINDS } from "../domain/Search.js"
import { Coordination } from "./Coordination.js"
import { Embeddings } from "./Embeddings.js"
import { Events } from "./Events.js"
import { Knowledge } from "./Knowledge.js"
import { spanned } from "./Spans.js"
import type { TextKind } from "./store/FullText.js"
import { makeFullText } from "./store/FullText.js"
import { readConcurrency } from "./store/Locking.js"

/**
 * The use case behind `sophia.search`, in two stages so that rows are read for the final page only:
 * 1. rank ids: each kind by BM25 in the index of the service that owns it (documents and facts by Knowledge,
 *    within the caller's entity scope; posts by Coordination) and, with an embeddings provider, by its
 *    nearest neighbours to the query's vector (Embeddings, within the same scope) — on Postgres the kinds'
 *    statements at once, on SQLite in turn (`store/Locking.ts` `readConcurrency`), the query's vector asked
 *    of the provider meanwhile;
 * 2. fuse the ids by reciprocal-rank fusion (k = 60) and read the rows of the final `limit` only, with
 *    their snippets, each kind from its owner.
 * A provider that fails or does not answer in time never fails a search: BM25 answers alone and the result
 * says `degraded` (why). It owns no table.
 */
export class Search extends Effect.Service<Search>()("sophia/Search", {
  effect: Effect.gen(function*() {
    const knowledge = yield* Knowledge
    const coordination = yield* Coordination
    const embeddings = yield* Embeddings
    // the kinds' statements at once where the store runs them at once (Postgres), else in turn
    const concurrency = readConcurrency(yield* SqlClient.SqlClient)
    const minSimilarity = yield* Config.number("SOPHIA_EMBEDDINGS_MIN_SIMILARITY").pipe(Config.withDefault(0.25), Effect.orDie)

    const bm25 = (caller: Caller, kind: SearchKind, query: string, limit: number) =>
      kind === "posts" ? coordination.rankPosts(caller, query, limit) : knowledge.rank(caller, kind, query, limit)

    /** The rows of the final page of one kind, by id (rows that left since the ranking are absent). */
    const rowsOf = (caller: Caller, kind: SearchKind, query: string, refs: ReadonlyArray<FusedId>) =>
      kind === "posts"
        ? Effect.map(coordination.postHits(caller, query, refs), (rows) =>
          rows.map((p): KindHit => ({
            kind: "post",
            id: p.id,
            title: `post ${p.channel} #${p.channel_seq}`,
            snippet: p.snippet,
            grounding: false,
            channel: p.channel,
            channel_seq: p.channel_seq,
            created_at: p.created_at
          })))
        : Effect.map(knowledge.hits(caller, kind, query, refs), (rows) =>
          rows.map((r): KindHit => ({
            kind: kind === "documents" ? "document" : "fact",
            id: r.id,
            title: r.title,
            snippet: r.snippet,
            grounding: true,
            entity_id: r.entity_id,
            created_at: r.created_at
          })))

    /** Each kind's nearest neighbours to the query's vector, within the caller's scope (posts: the user's). */
    const denseLists = (caller: Caller, kinds: ReadonlyArray<SearchKind>, vector: Float32Array, limit: number) =>
      Effect.gen(function*() {
        const scope = kinds.some((k) => k !== "posts") ? yield* knowledge.scopeOf(caller) : undefined
        return yield* Effect.forEach(kinds, (kind) =>
          Effect.map(
            embeddings.nearest(caller.userId, kind, vector, limit, kind === "posts" ? undefined : scope),
            (near): RankedList => ({
              kind,
              signal: "dense",
              ids: near.filter((n) => n.similarity >= minSimilarity).map((n) => ({ id: n.id, ref: 0 }))
            })
          ))
      })

    const search = spanned(
      "Search.search",
      Effect.fnUntraced(function*(caller: Caller, input: SearchInput) {
        const limit = input.limit ?? LIMITS.searchLimitDefault
        const kinds = input.kinds !== undefined && input.kinds.length > 0
          ? SEARCH_KINDS.filter((k) => input.kinds!.includes(k))
          : SEARCH_KINDS
        const lexicalLists = Effect.forEach(kinds, (kind) =>
          Effect.map(bm25(caller, kind, input.query, limit), (ids): RankedList => ({ kind, signal: "bm25", ids })), { concurrency })
        // the provider is asked while the kinds are ranked (a query's vector asked before is at hand)
        const kept = embeddings.configured ? embeddings.keptVector(input.query) : undefined
        const [lexical, vector] = !embeddings.configured
          ? [yield* lexicalLists, undefined]
          : kept !== undefined
          ? [yield* lexicalLists, Either.right(kept)]
          : yield* Effect.all([lexicalLists, Effect.either(embeddings.queryVector(input.query))], { concurrency: "unbounded" })
        const dense = vector !== undefined && Either.isRight(vector) ? yield* denseLists(caller, kinds, vector.right, limit) : []
        const lists = [...lexical, ...dense]
        const page = fuseIds(lists, RRF_K, limit)
        const rows = yield* Effect.forEach(kinds, (kind) => {
          const refs = page.filter((f) => f.kind === kind)
          return refs.length === 0 ? Effect.succeed([]) : rowsOf(caller, kind, input.query, refs)
        }, { concurrency })
        const byKey = new Map(rows.flat().map((r) => [`${r.kind}:${r.id}`, r]))
        const singular: Record<SearchKind, KindHit["kind"]> = { documents: "document", facts: "fact", posts: "post" }
        const items = page.flatMap((f): Array<SearchItem> => {
          const row = byKey.get(`${singular[f.kind]}:${f.id}`)
          return row === undefined ? [] : [{ ...row, score: f.score, rank: f.rank, signals: f.signals }]
        })
        const found = new Set(lists.flatMap((l) => l.ids.map((i) => `${l.kind}:${i.id}`)))
        const result: SearchOutput = {
          items,
          total: found.size,
          fusion: { method: "rrf", k: RRF_K, signals: dense.length > 0 ? ["bm25", "dense"] : ["bm25"] },
          ...(vector !== undefined && Either.isLeft(vector) ? { degraded: vector.left.reason } : {})
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
