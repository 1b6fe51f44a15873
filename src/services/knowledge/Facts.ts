import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { MutationChange, RememberFactInput, SubmitClaimGraphInput } from "../../domain/Knowledge.js"
import { InvalidGroundingSource } from "../../domain/Knowledge.js"
import { DbInt, nowIso } from "../../domain/Time.js"
import type { FullText } from "../store/FullText.js"
import { makeStatements } from "../store/Statements.js"
import type { Documents } from "./Documents.js"
import type { Entities } from "./Entities.js"
import { newId } from "./Journal.js"

const decodeFactHits = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  subject: Schema.String,
  predicate: Schema.String,
  object: Schema.String,
  entity_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  snippet: Schema.String,
  score: DbInt
})))

/** What the posts' owner says about a claim's sources (Coordination: which ids are the user's posts). */
export interface PostIds {
  readonly postIdsOf: (userId: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlySet<string>>
}

/**
 * Facts (`facts`) and the documents each cites (`fact_sources`): claims, remembered facts and their
 * full-text search (reading facts by subject and predicate is FactQuery.ts). A fact's index entry follows
 * from `fullText.changed`, logged in the write's transaction.
 */
export const makeFacts = (entities: Entities, documents: Documents, posts: PostIds, fullText: FullText) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named, shaped } = yield* makeStatements

    const insertFact = named("Knowledge.insertFact", (p: {
      id: string
      userId: string
      entityId: string | null
      subject: string
      predicate: string
      object: string
      origin: string
      createdBy: string
      createdAt: string
    }) =>
      sql`INSERT INTO facts (id, user_id, entity_id, subject, predicate, object, origin, created_by, created_at)
        VALUES (${p.id}, ${p.userId}, ${p.entityId}, ${p.subject}, ${p.predicate}, ${p.object}, ${p.origin}, ${p.createdBy}, ${p.createdAt})`)
    const insertSources = shaped("Knowledge.insertFactSources", 512, (p: { rows: ReadonlyArray<{ fact_id: string; document_id: string }> }) =>
      sql`INSERT INTO fact_sources ${sql.insert(p.rows as any)}`)
    const matches = fullText.matches("facts", ["subject", "predicate", "object", "entity_id", "created_at"])

    /**
     * Claims become facts only when every source is a document the caller can read. A source that is a
     * post is refused with `InvalidGroundingSource` (posts are never grounding); so is one that resolves
     * to nothing. All or nothing: the checks run before the first insert. The journal's changes.
     */
    const claim = (caller: Caller, input: SubmitClaimGraphInput) =>
      Effect.gen(function*() {
        const sourceIds = [...new Set(input.claims.flatMap((c) => c.source_ids))]
        // posts are Coordination's: it says which of the ids are the user's posts
        const postIds = yield* posts.postIdsOf(caller.userId, sourceIds)
        const scope = yield* entities.scopeIds(caller)
        const docs = yield* documents.citable(caller, sourceIds, scope)
        for (const [index, claim] of input.claims.entries()) {
          for (const source of claim.source_ids) {
            if (postIds.has(source)) {
              return yield* new InvalidGroundingSource({ source_id: source, claim_index: index, resolved_as: "post" })
            }
            if (!docs.has(source)) {
              return yield* new InvalidGroundingSource({ source_id: source, claim_index: index, resolved_as: "nothing" })
            }
          }
        }
        const explicitEntity = yield* entities.resolve(caller, input.entity)
        const at = yield* nowIso
        const changes: Array<MutationChange> = []
        for (const claim of input.claims) {
          const id = newId("fact")
          const sources = [...new Set(claim.source_ids)]
          const entityId = explicitEntity ?? docs.get(sources[0]) ?? null
          yield* insertFact({
            id,
            userId: caller.userId,
            entityId,
            subject: claim.subject,
            predicate: claim.predicate,
            object: claim.object,
            origin: "claim",
            createdBy: caller.connectionId,
            createdAt: at
          })
          yield* insertSources({ rows: sources.map((document_id) => ({ fact_id: id, document_id })) })
          changes.push({
            kind: "fact",
            id,
            before: null,
            after: { subject: claim.subject, predicate: claim.predicate, object: claim.object, entity_id: entityId, sources }
          })
        }
        yield* fullText.changed("facts", caller.userId, changes.map((c) => c.id))
        return changes
      })

    /** A fact without a document (the owner's explicit approval makes this legitimate); the journal's change. */
    const remember = (caller: Caller, input: RememberFactInput) =>
      Effect.gen(function*() {
        const entityId = yield* entities.resolve(caller, input.entity)
        const id = newId("fact")
        const at = yield* nowIso
        yield* insertFact({
          id,
          userId: caller.userId,
          entityId,
          subject: input.subject,
          predicate: input.predicate,
          object: input.object,
          origin: "remembered",
          createdBy: caller.connectionId,
          createdAt: at
        })
        yield* fullText.changed("facts", caller.userId, [id])
        const change: MutationChange = {
          kind: "fact",
          id,
          before: null,
          after: { subject: input.subject, predicate: input.predicate, object: input.object, entity_id: entityId, sources: [] }
        }
        return change
      })

    /**
     * Live facts matching the words (BM25 over subject, predicate and object; best first, `bm25` higher is
     * better), within the caller's entity scope. For `sophia.search`.
     */
    const search = (caller: Caller, text: string, limit: number) =>
      Effect.gen(function*() {
        const scope = yield* entities.scopeIds(caller)
        const rows = yield* Effect.flatMap(matches({ userId: caller.userId, text, limit, scope }), decodeFactHits)
        return rows.map((r) => ({
          fact_id: r.id,
          subject: r.subject,
          predicate: r.predicate,
          object: r.object,
          entity_id: r.entity_id,
          created_at: r.created_at,
          snippet: r.snippet,
          bm25: r.score
        }))
      })

    return { claim, remember, search } as const
  })

export type Facts = Effect.Effect.Success<ReturnType<typeof makeFacts>>
