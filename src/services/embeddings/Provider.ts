import { Config, Duration, Effect, Option, Redacted, Schema } from "effect"
import { EmbeddingsReply, ProviderFailed } from "../../domain/Embeddings.js"

/** The provider as configured (`SOPHIA_EMBEDDINGS_*`); absent when dense retrieval is off. */
export interface ProviderConfig {
  /** the `/v1/embeddings` endpoint, resolved from the configured URL */
  readonly endpoint: string
  readonly model: string
  readonly key: Option.Option<Redacted.Redacted>
  /** a search waits this long for its query's vector, then answers with BM25 alone */
  readonly queryTimeout: Duration.Duration
  /** a background batch waits this long */
  readonly batchTimeout: Duration.Duration
  /** texts per background request */
  readonly batch: number
}

/**
 * The endpoint of a configured URL: as given when it ends in `/embeddings`; `<url>/embeddings` when it ends
 * in `/v1` (OpenAI's base URL); else `<url>/v1/embeddings` (Ollama's, llama.cpp's or vLLM's server root).
 */
export const endpointOf = (url: string): string => {
  const trimmed = url.replace(/\/+$/, "")
  return /\/embeddings$/.test(trimmed) ? trimmed : /\/v1$/.test(trimmed) ? `${trimmed}/embeddings` : `${trimmed}/v1/embeddings`
}

/** The configuration, or none when `SOPHIA_EMBEDDINGS_URL` is not set (a URL without a model is logged and ignored). */
export const providerConfig: Effect.Effect<Option.Option<ProviderConfig>> = Effect.gen(function*() {
  const url = yield* Config.option(Config.string("SOPHIA_EMBEDDINGS_URL"))
  if (Option.isNone(url) || url.value.trim() === "") return Option.none()
  const model = yield* Config.option(Config.string("SOPHIA_EMBEDDINGS_MODEL"))
  if (Option.isNone(model) || model.value.trim() === "") {
    yield* Effect.logWarning("SOPHIA_EMBEDDINGS_URL is set without SOPHIA_EMBEDDINGS_MODEL: dense retrieval stays off")
    return Option.none()
  }
  const key = yield* Config.option(Config.redacted("SOPHIA_EMBEDDINGS_KEY"))
  const queryMs = yield* Config.integer("SOPHIA_EMBEDDINGS_TIMEOUT_MS").pipe(Config.withDefault(2000))
  const batch = yield* Config.integer("SOPHIA_EMBEDDINGS_BATCH").pipe(Config.withDefault(64))
  return Option.some({
    endpoint: endpointOf(url.value.trim()),
    model: model.value.trim(),
    key,
    queryTimeout: Duration.millis(Math.max(1, queryMs)),
    batchTimeout: Duration.seconds(60),
    batch: Math.max(1, Math.min(batch, 2048))
  })
}).pipe(Effect.orDie)

const decodeReply = Schema.decodeUnknown(EmbeddingsReply)

/** Unit length (so a dot product is the cosine); a zero vector stays zero. */
export const normalize = (values: ReadonlyArray<number>): Float32Array => {
  const v = Float32Array.from(values)
  let norm = 0
  for (let i = 0; i < v.length; i++) norm += v[i] * v[i]
  norm = Math.sqrt(norm)
  if (norm > 0) for (let i = 0; i < v.length; i++) v[i] /= norm
  return v
}

/**
 * The client: `POST <endpoint>` with `{ model, input: [texts] }` (and `Authorization: Bearer <key>` when a key
 * is set) → one unit-length vector per text, in the texts' order. Any failure — unreachable, a non-2xx answer,
 * a reply of the wrong shape or length, no answer within `timeout` (the request is aborted) — is `ProviderFailed`.
 */
export const makeProvider = (config: ProviderConfig) => {
  const headers: Record<string, string> = { "content-type": "application/json" }
  if (Option.isSome(config.key)) headers.authorization = `Bearer ${Redacted.value(config.key.value)}`
  const embed = (texts: ReadonlyArray<string>, timeout: Duration.Duration): Effect.Effect<Array<Float32Array>, ProviderFailed> =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetch(config.endpoint, {
          method: "POST",
          headers,
          body: JSON.stringify({ model: config.model, input: texts }),
          signal
        })
        if (!response.ok) throw new Error(`HTTP ${response.status}`)
        return await response.json() as unknown
      },
      catch: (e) => new ProviderFailed({ reason: e instanceof Error ? e.message : String(e) })
    }).pipe(
      Effect.timeoutFail({ duration: timeout, onTimeout: () => new ProviderFailed({ reason: `no answer within ${Duration.format(timeout)}` }) }),
      Effect.flatMap((body) => Effect.mapError(decodeReply(body), () => new ProviderFailed({ reason: "not an embeddings reply" }))),
      Effect.flatMap((reply) => {
        if (reply.data.length !== texts.length) {
          return Effect.fail(new ProviderFailed({ reason: `${reply.data.length} vectors for ${texts.length} texts` }))
        }
        const ordered = [...reply.data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0))
        const dim = ordered[0]?.embedding.length ?? 0
        if (ordered.some((d) => d.embedding.length !== dim || dim === 0)) {
          return Effect.fail(new ProviderFailed({ reason: "vectors of differing or zero length" }))
        }
        return Effect.succeed(ordered.map((d) => normalize(d.embedding)))
      })
    )
  return { embed } as const
}

export type Provider = ReturnType<typeof makeProvider>
