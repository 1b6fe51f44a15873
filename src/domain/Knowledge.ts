import { Schema } from "effect"

/**
 * Knowledge: entities, documents (the only grounding sources), facts that cite them, and the mutation
 * journal every knowledge write leaves behind. Ids carry a prefix naming what they are.
 */

export const LIMITS = {
  titleChars: 512,
  bodyChars: 256 * 1024,
  uriChars: 2048,
  termChars: 1024,
  claimsPerGraph: 100,
  sourcesPerClaim: 32,
  searchLimitDefault: 10,
  searchLimitMax: 100,
  queryLimitDefault: 50,
  queryLimitMax: 200,
  importDocumentsMax: 500,
  /** total body characters of one import session */
  importChars: 8 * 1024 * 1024
} as const

const Term = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(LIMITS.termChars))

/** An entity id (`ent-…`) or an entity's exact name. */
export const EntityRef = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)).annotations({
  description: "entity id or name"
})

// ---------------------------------------------------------------- entities

export const EntityKind = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))

export const CreateEntityInput = Schema.Struct({
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)),
  kind: EntityKind
})
export type CreateEntityInput = typeof CreateEntityInput.Type

export const CreateEntityOutput = Schema.Struct({
  entity_id: Schema.String,
  name: Schema.String,
  kind: Schema.String,
  mutation_id: Schema.String
})

// ---------------------------------------------------------------- documents

export const AddDocumentInput = Schema.Struct({
  title: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(LIMITS.titleChars)),
  body: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(LIMITS.bodyChars)),
  uri: Schema.optional(Schema.String.pipe(Schema.maxLength(LIMITS.uriChars))),
  entity: Schema.optional(EntityRef)
})
export type AddDocumentInput = typeof AddDocumentInput.Type

export const AddDocumentOutput = Schema.Struct({
  document_id: Schema.String,
  mutation_id: Schema.String
})

export const SearchDocumentsInput = Schema.Struct({
  query: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(LIMITS.termChars)).annotations({
    description: "words (any may match)"
  }),
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, LIMITS.searchLimitMax)))
})
export type SearchDocumentsInput = typeof SearchDocumentsInput.Type

export const DocumentHit = Schema.Struct({
  document_id: Schema.String,
  title: Schema.String,
  snippet: Schema.String,
  score: Schema.Number,
  uri: Schema.NullOr(Schema.String),
  entity_id: Schema.NullOr(Schema.String),
  created_at: Schema.String
})
export type DocumentHit = typeof DocumentHit.Type
export const DOCUMENT_HIT_COMPACT = ["document_id", "title", "snippet", "score"] as const

export const SearchDocumentsOutput = Schema.Struct({ items: Schema.Array(DocumentHit) })

// ---------------------------------------------------------------- claims and facts

export const Claim = Schema.Struct({
  subject: Term,
  predicate: Term,
  object: Term,
  source_ids: Schema.Array(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))).pipe(
    Schema.minItems(1),
    Schema.maxItems(LIMITS.sourcesPerClaim)
  ).annotations({ description: "document ids; posts never ground" })
})
export type Claim = typeof Claim.Type

export const SubmitClaimGraphInput = Schema.Struct({
  claims: Schema.Array(Claim).pipe(Schema.minItems(1), Schema.maxItems(LIMITS.claimsPerGraph)),
  entity: Schema.optional(EntityRef).annotations({ description: "default: the first source's" })
})
export type SubmitClaimGraphInput = typeof SubmitClaimGraphInput.Type

export const SubmitClaimGraphOutput = Schema.Struct({
  fact_ids: Schema.Array(Schema.String),
  mutation_id: Schema.String
})

export const RememberFactInput = Schema.Struct({
  subject: Term,
  predicate: Term,
  object: Term,
  entity: Schema.optional(EntityRef)
})
export type RememberFactInput = typeof RememberFactInput.Type

export const RememberFactOutput = Schema.Struct({ fact_id: Schema.String, mutation_id: Schema.String })

export const QueryKnowledgeInput = Schema.Struct({
  subject: Schema.optional(Schema.String.pipe(Schema.maxLength(LIMITS.termChars))),
  predicate: Schema.optional(Schema.String.pipe(Schema.maxLength(LIMITS.termChars))),
  text: Schema.optional(Schema.String.pipe(Schema.maxLength(LIMITS.termChars))),
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, LIMITS.queryLimitMax)))
})
export type QueryKnowledgeInput = typeof QueryKnowledgeInput.Type

export const FactSource = Schema.Struct({ document_id: Schema.String, title: Schema.String, uri: Schema.NullOr(Schema.String) })

export const FactRow = Schema.Struct({
  fact_id: Schema.String,
  subject: Schema.String,
  predicate: Schema.String,
  object: Schema.String,
  entity_id: Schema.NullOr(Schema.String),
  /** "claim" (grounded in documents) or "remembered" (the owner approved it without a document) */
  origin: Schema.Literal("claim", "remembered"),
  sources: Schema.Array(FactSource),
  created_by: Schema.String,
  created_at: Schema.String
})
export type FactRow = typeof FactRow.Type
export const FACT_COMPACT = ["fact_id", "subject", "predicate", "object", "sources"] as const

export const QueryKnowledgeOutput = Schema.Struct({ facts: Schema.Array(FactRow) })

// ---------------------------------------------------------------- import sessions

export const ImportDocument = Schema.Struct({
  title: AddDocumentInput.fields.title,
  body: AddDocumentInput.fields.body,
  uri: AddDocumentInput.fields.uri
})

export const BeginImportSessionInput = Schema.Struct({
  documents: Schema.Array(ImportDocument).pipe(
    Schema.minItems(1),
    Schema.maxItems(LIMITS.importDocumentsMax),
    // no JSON Schema keyword bounds a sum over items: the description says it
    Schema.filter((docs) =>
      docs.reduce((n, d) => n + d.body.length, 0) <= LIMITS.importChars ||
      `an import session holds at most ${LIMITS.importChars} body characters in total`, {
      jsonSchema: {},
      description: `bodies ≤ ${LIMITS.importChars / (1024 * 1024)} Mi chars in all`
    })
  ),
  entity: Schema.optional(EntityRef)
})
export type BeginImportSessionInput = typeof BeginImportSessionInput.Type

export const BeginImportSessionOutput = Schema.Struct({
  import_session_id: Schema.String,
  status: Schema.Literal("committed"),
  document_ids: Schema.Array(Schema.String),
  mutation_id: Schema.String
})

// ---------------------------------------------------------------- journal

export const RevertMutationInput = Schema.Struct({
  mutation_id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))
})

export const RevertMutationOutput = Schema.Struct({
  mutation_id: Schema.String,
  reverted: Schema.String,
  changes: Schema.Int
})

/** One row-level change of a journaled mutation: a row of `kind` came into (after) or went out of (before) existence. */
export const MutationChange = Schema.Struct({
  kind: Schema.Literal("document", "fact", "entity"),
  id: Schema.String,
  before: Schema.NullOr(Schema.Unknown),
  after: Schema.NullOr(Schema.Unknown)
})
export type MutationChange = typeof MutationChange.Type

// ---------------------------------------------------------------- refusals

export const POST_NOT_GROUNDING = "agent posts are not valid grounding sources — cite the primary source the post references."

export class InvalidGroundingSource extends Schema.TaggedError<InvalidGroundingSource>()("InvalidGroundingSource", {
  source_id: Schema.String,
  claim_index: Schema.Int,
  resolved_as: Schema.Literal("post", "nothing")
}) {
  override get message() {
    return this.resolved_as === "post"
      ? POST_NOT_GROUNDING
      : `source ${JSON.stringify(this.source_id)} resolves to no document you can read; only documents (sophia.add_document) ground a claim.`
  }
}
