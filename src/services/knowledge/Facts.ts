import { SqlClient } from "@effect/sql"
import { Effect, Schema, Struct } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { FactRow, MutationChange, QueryKnowledgeInput, RememberFactInput, SubmitClaimGraphInput } from "../../domain/Knowledge.js"
import { FactRow as FactRowSchema, FactSource, InvalidGroundingSource, LIMITS } from "../../domain/Knowledge.js"
import { DbInt, nowIso } from "../../domain/Time.js"
import type { FullText } from "../store/FullText.js"
import { limitTo, makeStatements } from "../store/Statements.js"
import type { Documents } from "./Documents.js"
import type { Entities } from "./Entities.js"
import { newId } from "./Journal.js"

const decodeFacts = Schema.decodeUnknown(
  Schema.Array(Schema.Struct({ id: Schema.String, ...Struct.omit(FactRowSchema.fields, "fact_id", "sources") }))
)
const decodeSources = Schema.decodeUnknown(Schema.Array(Schema.Struct({ fact_id: Schema.String, ...FactSource.fields })))
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
 * Facts (`facts`) and the documents each cites (`fact_sources`). A fact's full-text index entry follows
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
    const sourcesOf = shaped("Knowledge.factSources", 512, (p: { factIds: ReadonlyArray<string> }) =>
      sql`SELECT fs.fact_id, d.id AS document_id, d.title, d.uri
        FROM fact_sources fs JOIN documents d ON d.id = fs.document_id AND d.deleted_at IS NULL
        WHERE fs.fact_id IN ${sql.in(p.factIds)} ORDER BY d.id`)
    const sourcesInScope = shaped(
      "Knowledge.factSourcesInScope",
      512,
      (p: { factIds: ReadonlyArray<string>; scope: ReadonlyArray<string> }) =>
        sql`SELECT fs.fact_id, d.id AS document_id, d.title, d.uri
        FROM fact_sources fs JOIN documents d ON d.id = fs.document_id AND d.deleted_at IS NULL
        WHERE fs.fact_id IN ${sql.in(p.factIds)} AND d.entity_id IN ${sql.in(p.scope)} ORDER BY d.id`
    )
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

    /** Facts by subject / predicate (case-insensitive) and/or a substring of any part, each with its sources. */
    const query = (caller: Caller, input: QueryKnowledgeInput) =>
      Effect.gen(function*() {
        const scope = yield* entities.scopeIds(caller)
        if (scope !== undefined && scope.length === 0) return { facts: [] as Array<FactRow> }
        const like = input.text !== undefined && input.text.length > 0
          ? `%${input.text.toLowerCase().replace(/[\\%_]/g, (c) => "\\" + c)}%`
          : undefined
        // the conditions present vary: a statement built per call
        const facts = yield* sql`SELECT f.id, f.subject, f.predicate,
            f.object, f.entity_id, f.origin, f.created_by, f.created_at
          FROM facts f
          WHERE f.user_id = ${caller.userId} AND f.deleted_at IS NULL
            ${input.subject !== undefined ? sql`AND lower(f.subject) = ${input.subject.toLowerCase()}` : sql``}
            ${input.predicate !== undefined ? sql`AND lower(f.predicate) = ${input.predicate.toLowerCase()}` : sql``}
            ${
          like !== undefined
            ? sql`AND (lower(f.subject) LIKE ${like} ESCAPE '\\' OR lower(f.predicate) LIKE ${like} ESCAPE '\\'
                   OR lower(f.object) LIKE ${like} ESCAPE '\\')`
            : sql``
        }
            ${scope === undefined ? sql`` : sql`AND f.entity_id IN ${sql.in(scope)}`}
          ORDER BY f.created_at DESC, f.id
          ${limitTo(sql, input.limit ?? LIMITS.queryLimitDefault)}`.pipe(Effect.flatMap(decodeFacts))
        if (facts.length === 0) return { facts: [] as Array<FactRow> }
        const factIds = facts.map((f) => f.id)
        const sources = yield* Effect.flatMap(
          scope === undefined ? sourcesOf({ factIds }) : sourcesInScope({ factIds, scope }),
          decodeSources
        )
        const byFact = new Map<string, Array<{ document_id: string; title: string; uri: string | null }>>()
        for (const s of sources) {
          const list = byFact.get(s.fact_id) ?? []
          list.push({ document_id: s.document_id, title: s.title, uri: s.uri })
          byFact.set(s.fact_id, list)
        }
        return {
          facts: facts.map(({ id, ...f }): FactRow => ({ fact_id: id, ...f, sources: byFact.get(id) ?? [] }))
        }
      })

    return { claim, remember, search, query } as const
  })

export type Facts = Effect.Effect.Success<ReturnType<typeof makeFacts>>
