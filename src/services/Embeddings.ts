import { Clock, Duration, Effect, Option } from "effect"
import type { EmbeddingKind, EmbeddingStatus } from "../domain/Embeddings.js"
import { ProviderFailed } from "../domain/Embeddings.js"
import type { ScanMethod } from "./embeddings/Nearest.js"
import { makeNearest } from "./embeddings/Nearest.js"
import type { Progress, VectorRow } from "./embeddings/Vectors.js"
import { makeVectors } from "./embeddings/Vectors.js"
import { makeProvider, providerConfig } from "./embeddings/Provider.js"
import { spanned } from "./Spans.js"

/** Query vectors kept (a repeated query asks the provider once). */
const QUERY_CACHE = 512
/** After a provider failure, searches do not ask it again for this long (they answer with BM25 at once). */
const COOL_DOWN_MS = 5_000

/**
 * Dense retrieval's half that talks to the provider and keeps the vectors (docs/architecture.md, "Dense
 * retrieval"): the OpenAI-compatible client (`embeddings/Provider.ts`, configured by `SOPHIA_EMBEDDINGS_*`),
 * the vectors and the feed's progress (`embeddings/Vectors.ts`; tables `embedding_vectors`,
 * `embedding_progress`), exact nearest neighbours in memory (`embeddings/Nearest.ts`). What gets embedded
 * and when is the feed's (`embeddings/Feed.ts`, `EmbeddingFeed`: background batches after the writes
 * commit, never on a write's path); `sophia.search` asks `queryVector` and `nearest` (services/Search.ts).
 * Without `SOPHIA_EMBEDDINGS_URL` it is off: `configured` is false and nothing calls out.
 */
export class Embeddings extends Effect.Service<Embeddings>()("sophia/Embeddings", {
  effect: Effect.gen(function*() {
    const config = yield* providerConfig
    const model = Option.match(config, { onNone: () => "", onSome: (c) => c.model })
    const provider = Option.map(config, makeProvider)
    const vectors = yield* makeVectors(model)
    const index = makeNearest(vectors)
    const cache = new Map<string, Float32Array>()
    let failedAt = Number.NEGATIVE_INFINITY
    let lastFailure = ""
    let backlog = 0
    let embedded = 0

    const off = Effect.fail(new ProviderFailed({ reason: "no embeddings provider configured" }))

    /**
     * The query's vector, within the configured timeout (`SOPHIA_EMBEDDINGS_TIMEOUT_MS`, default 2000 ms). A
     * failure fails this call only; for a few seconds after one, searches do not wait on the provider again.
     */
    const queryVector = spanned(
      "Embeddings.queryVector",
      Effect.fnUntraced(function*(text: string) {
        if (Option.isNone(provider) || Option.isNone(config)) return yield* off
        const kept = cache.get(text)
        if (kept !== undefined) return kept
        const now = yield* Clock.currentTimeMillis
        if (now - failedAt < COOL_DOWN_MS) {
          return yield* new ProviderFailed({ reason: `provider failed ${Math.round((now - failedAt) / 1000)} s ago: ${lastFailure}` })
        }
        const [vector] = yield* provider.value.embed([text], config.value.queryTimeout).pipe(
          Effect.tapError((e) =>
            Effect.map(Clock.currentTimeMillis, (at) => {
              failedAt = at
              lastFailure = e.reason
            })
          )
        )
        if (cache.size >= QUERY_CACHE) cache.delete(cache.keys().next().value!)
        cache.set(text, vector)
        return vector
      })
    )

    /** A query's vector if it was asked before (kept: no call to the provider). */
    const keptVector = (text: string): Float32Array | undefined => cache.get(text)

    /** A background batch's vectors (a minute's timeout): the feed's call. */
    const embedBatch = spanned(
      "Embeddings.embedBatch",
      Effect.fnUntraced(function*(texts: ReadonlyArray<string>) {
        if (Option.isNone(provider)) return yield* off
        return yield* provider.value.embed(texts, Duration.seconds(60))
      })
    )

    /**
     * The user's nearest items of a kind (best first, cosine), within `scope` (undefined = none, empty =
     * nothing). `method`: `auto` (search), or a forced scan (the bench measures each).
     */
    const nearest = spanned(
      "Embeddings.nearest",
      Effect.fnUntraced(function*(
        userId: string,
        kind: EmbeddingKind,
        query: Float32Array,
        limit: number,
        scope: ReadonlyArray<string> | undefined,
        method: ScanMethod = "auto"
      ) {
        return yield* index.nearest(userId, kind, query, limit, scope, method)
      }, Effect.catchTag("SqlError", Effect.die))
    )

    /** The feed's progress in a kind, by user ('' for documents and facts). */
    const progress = spanned(
      "Embeddings.progress",
      Effect.fnUntraced(function*(kind: EmbeddingKind) {
        return yield* vectors.progress(kind)
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** Of these ids, the ones already embedded. */
    const embeddedAmong = spanned(
      "Embeddings.embeddedAmong",
      Effect.fnUntraced(function*(kind: EmbeddingKind, ids: ReadonlyArray<string>) {
        return yield* vectors.embedded(kind, ids)
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** A batch's vectors and the feed's progress after it, in one transaction. */
    const store = spanned(
      "Embeddings.store",
      Effect.fnUntraced(function*(rows: ReadonlyArray<VectorRow>, kind: EmbeddingKind, userId: string, next: Progress) {
        yield* vectors.write(rows, kind, userId, next)
        embedded += rows.length
        backlog = Math.max(0, backlog - rows.length)
      }, Effect.catchTag("SqlError", Effect.die))
    )

    /** The feed counted what is left to embed. */
    const counted = (n: number) => Effect.sync(() => void (backlog = n))

    /** What `orient` and `/metrics` show: undefined when dense retrieval is off. */
    const status = (): EmbeddingStatus | undefined =>
      Option.isNone(config) ? undefined : { model, backlog, embedded }

    return {
      configured: Option.isSome(config),
      model,
      batchSize: Option.match(config, { onNone: () => 0, onSome: (c) => c.batch }),
      queryVector,
      keptVector,
      embedBatch,
      nearest,
      progress,
      embeddedAmong,
      store,
      counted,
      status,
      held: index.held
    } as const
  })
}) {}
