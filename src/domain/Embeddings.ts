import { Schema } from "effect"

/**
 * Dense retrieval: documents, facts and posts embedded by an OpenAI-compatible `/v1/embeddings` provider
 * (`SOPHIA_EMBEDDINGS_URL`, `_MODEL`, `_KEY`), searched by nearest neighbours per kind and fused with BM25.
 * Never a refusal an agent sees: a provider that fails leaves `sophia.search` to BM25 (`degraded`).
 */

/** The kinds that are embedded (the kinds `sophia.search` ranks). */
export type EmbeddingKind = "documents" | "facts" | "posts"

/** The provider did not answer with vectors: unreachable, an HTTP error, a malformed reply, or too slow. */
export class ProviderFailed extends Schema.TaggedError<ProviderFailed>()("ProviderFailed", {
  reason: Schema.String
}) {}

/** The reply of `POST /v1/embeddings` (OpenAI's shape; Ollama, llama.cpp and vLLM answer the same). */
export const EmbeddingsReply = Schema.Struct({
  data: Schema.Array(Schema.Struct({ index: Schema.optional(Schema.Number), embedding: Schema.Array(Schema.Number) }))
})

/** What `orient` and `/metrics` show of the feed: rows written but not embedded yet, as this daemon last counted. */
export interface EmbeddingStatus {
  readonly model: string
  readonly backlog: number
  readonly embedded: number
}
