import { SqlClient } from "@effect/sql"
import type { Statement } from "@effect/sql"
import { Effect, Schema, Struct } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../domain/Auth.js"
import { NotFound, ValidationError } from "../domain/Errors.js"
import type {
  AddDocumentInput,
  BeginImportSessionInput,
  CreateEntityInput,
  DocumentHit,
  FactRow,
  MutationChange,
  QueryKnowledgeInput,
  RememberFactInput,
  SearchDocumentsInput,
  SubmitClaimGraphInput
} from "../domain/Knowledge.js"
import {
  DocumentHit as DocumentHitSchema,
  FactRow as FactRowSchema,
  FactSource,
  InvalidGroundingSource,
  LIMITS,
  MutationChange as MutationChangeSchema
} from "../domain/Knowledge.js"
import { DbInt, nowIso } from "../domain/Time.js"
import { ftsQuery, tsQuery } from "../domain/Search.js"
import { Coordination } from "./Coordination.js"
import { serialize } from "./Dialect.js"
import { limitTo } from "./Statements.js"

const newId = (prefix: string) => `${prefix}-${randomUUID()}`

export { ftsQuery, tsQuery } from "../domain/Search.js"


const decodeChanges = Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(MutationChangeSchema)))

const MutationRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  connection_id: Schema.String,
  tool: Schema.String,
  changes: Schema.String,
  reverts: Schema.NullOr(Schema.String),
  reverted_by: Schema.NullOr(Schema.String),
  created_at: Schema.String
})
const decodeMutations = Schema.decodeUnknown(Schema.Array(MutationRow))
const decodeHits = Schema.decodeUnknown(Schema.Array(Schema.Struct({ ...DocumentHitSchema.fields, score: DbInt })))
const decodeFacts = Schema.decodeUnknown(
  Schema.Array(Schema.Struct({ id: Schema.String, ...Struct.omit(FactRowSchema.fields, "fact_id", "sources") }))
)
const decodeSources = Schema.decodeUnknown(Schema.Array(Schema.Struct({ fact_id: Schema.String, ...FactSource.fields })))
const decodeCount = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ n: DbInt })))

const TABLE = { document: "documents", fact: "facts", entity: "entities" } as const

/**
 * Entities, documents (the only grounding sources), facts and the mutation journal. Every write is one
 * transaction that also writes its journal entry; every read is filtered by the caller's user and, when
 * the connection carries one, its entity scope.
 */
export class Knowledge extends Effect.Service<Knowledge>()("sophia/Knowledge", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const coordination = yield* Coordination

    /**
     * The entity ids a caller may read: undefined = everything (no scope). Scope entries are entity ids or
     * names; an entry naming nothing grants nothing.
     */
    const scopeIds = (caller: Caller) =>
      Effect.gen(function*() {
        if (caller.entityScope.length === 0) return undefined
        const rows = yield* sql<{ id: string }>`SELECT id FROM entities WHERE user_id = ${caller.userId}
          AND deleted_at IS NULL AND (id IN ${sql.in(caller.entityScope)} OR name IN ${sql.in(caller.entityScope)})`
        return rows.map((r) => r.id)
      })

    /** `AND <column> IN (scope)` or nothing; callers return early on an empty scope. */
    const scopeClause = (column: string, ids: ReadonlyArray<string> | undefined): Statement.Fragment =>
      ids === undefined ? sql`` : sql`AND ${sql(column)} IN ${sql.in(ids)}`

    /** An entity reference (id or exact name) among the caller's live entities, inside its scope. */
    const resolveEntity = (caller: Caller, ref: string | undefined) =>
      Effect.gen(function*() {
        if (ref === undefined) return null
        const rows = yield* sql<{ id: string }>`SELECT id FROM entities WHERE user_id = ${caller.userId}
          AND deleted_at IS NULL AND (id = ${ref} OR name = ${ref}) ORDER BY CASE WHEN id = ${ref} THEN 0 ELSE 1 END`
        const scope = yield* scopeIds(caller)
        const id = rows[0]?.id
        if (id === undefined || (scope !== undefined && !scope.includes(id))) {
          return yield* new NotFound({ what: "entity", id: ref })
        }
        return id
      })

    const journal = (caller: Caller, tool: string, changes: ReadonlyArray<MutationChange>, reverts: string | null = null) =>
      Effect.gen(function*() {
        const id = newId("mut")
        yield* sql`INSERT INTO mutations (id, user_id, connection_id, tool, changes, reverts, created_at)
          VALUES (${id}, ${caller.userId}, ${caller.connectionId}, ${tool}, ${JSON.stringify(changes)}, ${reverts}, ${yield* nowIso})`
        return id
      })

    const insertDocument = (
      caller: Caller,
      doc: { readonly title: string; readonly body: string; readonly uri?: string | undefined },
      entityId: string | null,
      importSessionId: string | null,
      at: string
    ) =>
      Effect.gen(function*() {
        const id = newId("doc")
        const uri = doc.uri ?? null
        yield* sql`INSERT INTO documents (id, user_id, entity_id, title, body, uri, import_session_id, created_by, created_at)
          VALUES (${id}, ${caller.userId}, ${entityId}, ${doc.title}, ${doc.body}, ${uri}, ${importSessionId},
                  ${caller.connectionId}, ${at})`
        yield* indexDocument(id)
        const change: MutationChange = {
          kind: "document",
          id,
          before: null,
          after: { title: doc.title, uri, entity_id: entityId, body_chars: doc.body.length, created_at: at }
        }
        return change
      })

    const indexDocument = (id: string) =>
      sql.onDialectOrElse({
        pg: () => Effect.void,
        orElse: () =>
          sql`INSERT INTO documents_fts (document_id, user_id, entity_id, title, body)
            SELECT id, user_id, entity_id, title, body FROM documents WHERE id = ${id}`
      })
    const unindexDocument = (id: string) =>
      sql.onDialectOrElse({
        pg: () => Effect.void,
        orElse: () => sql`DELETE FROM documents_fts WHERE document_id = ${id}`
      })

    // ------------------------------------------------------------------ writes

    const createEntity = Effect.fn("Knowledge.createEntity")(function*(caller: Caller, input: CreateEntityInput) {
      // the clash check and the insert are one decision per user: serialized (advisory lock, Dialect.ts), so
      // concurrent writers get one entity and one ValidationError (entities_live_name stays the backstop)
      yield* serialize(sql, `entity-names/${caller.userId}`)
      const clash = yield* sql<{ id: string }>`SELECT id FROM entities WHERE user_id = ${caller.userId}
        AND name = ${input.name} AND deleted_at IS NULL`
      if (clash.length > 0) {
        return yield* new ValidationError({ detail: `an entity named ${JSON.stringify(input.name)} already exists (${clash[0].id})` })
      }
      const id = newId("ent")
      const at = yield* nowIso
      yield* sql`INSERT INTO entities (id, user_id, name, kind, created_by, created_at)
        VALUES (${id}, ${caller.userId}, ${input.name}, ${input.kind}, ${caller.connectionId}, ${at})`
      const mutationId = yield* journal(caller, "sophia.create_entity", [
        { kind: "entity", id, before: null, after: { name: input.name, kind: input.kind, created_at: at } }
      ])
      return { entity_id: id, name: input.name, kind: input.kind, mutation_id: mutationId }
    }, sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

    const addDocument = Effect.fn("Knowledge.addDocument")(function*(caller: Caller, input: AddDocumentInput) {
      const entityId = yield* resolveEntity(caller, input.entity)
      const change = yield* insertDocument(caller, input, entityId, null, yield* nowIso)
      const mutationId = yield* journal(caller, "sophia.add_document", [change])
      return { document_id: change.id, mutation_id: mutationId }
    }, sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

    /** A bounded batch of documents, committed as one import session, or nothing at all. */
    const importDocuments = Effect.fn("Knowledge.importDocuments")(function*(caller: Caller, input: BeginImportSessionInput) {
      const entityId = yield* resolveEntity(caller, input.entity)
      const sessionId = newId("imp")
      const at = yield* nowIso
      const changes: Array<MutationChange> = []
      for (const doc of input.documents) changes.push(yield* insertDocument(caller, doc, entityId, sessionId, at))
      yield* sql`INSERT INTO import_sessions (id, user_id, connection_id, entity_id, status, document_count, created_at)
        VALUES (${sessionId}, ${caller.userId}, ${caller.connectionId}, ${entityId}, 'committed', ${changes.length}, ${at})`
      const mutationId = yield* journal(caller, "sophia.begin_import_session", changes)
      return {
        import_session_id: sessionId,
        status: "committed" as const,
        document_ids: changes.map((c) => c.id),
        mutation_id: mutationId
      }
    }, sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

    /**
     * Claims become facts only when every source is a document the caller can read. A source that is a
     * post is refused with `InvalidGroundingSource` (posts are never grounding); so is one that resolves
     * to nothing. All or nothing: the checks run before the first insert.
     */
    const submitClaimGraph = Effect.fn("Knowledge.submitClaimGraph")(function*(caller: Caller, input: SubmitClaimGraphInput) {
      const sourceIds = [...new Set(input.claims.flatMap((c) => c.source_ids))]
      // posts are Coordination's: it says which of the ids are the user's posts
      const posts = yield* coordination.postIdsOf(caller.userId, sourceIds)
      const scope = yield* scopeIds(caller)
      const docs = new Map(
        (yield* sql<{ id: string; user_id: string; entity_id: string | null; deleted_at: string | null }>`SELECT id,
            user_id, entity_id, deleted_at FROM documents WHERE id IN ${sql.in(sourceIds)}`)
          .filter((r) =>
            r.user_id === caller.userId && r.deleted_at === null &&
            (scope === undefined || (r.entity_id !== null && scope.includes(r.entity_id)))
          )
          .map((r) => [r.id, r.entity_id] as const)
      )
      for (const [index, claim] of input.claims.entries()) {
        for (const source of claim.source_ids) {
          if (posts.has(source)) {
            return yield* new InvalidGroundingSource({ source_id: source, claim_index: index, resolved_as: "post" })
          }
          if (!docs.has(source)) {
            return yield* new InvalidGroundingSource({ source_id: source, claim_index: index, resolved_as: "nothing" })
          }
        }
      }
      const explicitEntity = yield* resolveEntity(caller, input.entity)
      const at = yield* nowIso
      const changes: Array<MutationChange> = []
      for (const claim of input.claims) {
        const id = newId("fact")
        const sources = [...new Set(claim.source_ids)]
        const entityId = explicitEntity ?? docs.get(sources[0]) ?? null
        yield* sql`INSERT INTO facts (id, user_id, entity_id, subject, predicate, object, origin, created_by, created_at)
          VALUES (${id}, ${caller.userId}, ${entityId}, ${claim.subject}, ${claim.predicate}, ${claim.object}, 'claim',
                  ${caller.connectionId}, ${at})`
        yield* sql`INSERT INTO fact_sources ${sql.insert(sources.map((document_id) => ({ fact_id: id, document_id })))}`
        changes.push({
          kind: "fact",
          id,
          before: null,
          after: { subject: claim.subject, predicate: claim.predicate, object: claim.object, entity_id: entityId, sources }
        })
      }
      const mutationId = yield* journal(caller, "sophia.submit_claim_graph", changes)
      return { fact_ids: changes.map((c) => c.id), mutation_id: mutationId }
    }, sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

    /** A fact without a document: only the owner's explicit approval makes this legitimate (an elevated tool). */
    const rememberFact = Effect.fn("Knowledge.rememberFact")(function*(caller: Caller, input: RememberFactInput) {
      const entityId = yield* resolveEntity(caller, input.entity)
      const id = newId("fact")
      const at = yield* nowIso
      yield* sql`INSERT INTO facts (id, user_id, entity_id, subject, predicate, object, origin, created_by, created_at)
        VALUES (${id}, ${caller.userId}, ${entityId}, ${input.subject}, ${input.predicate}, ${input.object}, 'remembered',
                ${caller.connectionId}, ${at})`
      const mutationId = yield* journal(caller, "sophia.remember_fact", [
        {
          kind: "fact",
          id,
          before: null,
          after: { subject: input.subject, predicate: input.predicate, object: input.object, entity_id: entityId, sources: [] }
        }
      ])
      return { fact_id: id, mutation_id: mutationId }
    }, sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

    /**
     * Write the compensating change of a journaled mutation: rows it created go (soft-deleted, out of the
     * index), rows it removed come back. The revert is journaled itself (and can be reverted in turn).
     */
    const revert = Effect.fn("Knowledge.revert")(function*(caller: Caller, mutationId: string) {
      const rows = yield* sql`SELECT * FROM mutations WHERE id = ${mutationId} AND user_id = ${caller.userId}`.pipe(
        Effect.flatMap(decodeMutations)
      )
      const row = rows[0]
      if (row === undefined) return yield* new NotFound({ what: "mutation", id: mutationId })
      if (row.reverted_by !== null) {
        return yield* new ValidationError({ detail: `mutation ${mutationId} was already reverted by ${row.reverted_by}` })
      }
      const changes = decodeChanges(row.changes)
      const at = yield* nowIso
      for (const change of [...changes].reverse()) {
        const table = TABLE[change.kind]
        if (change.before === null && change.after !== null) {
          yield* sql`UPDATE ${sql(table)} SET deleted_at = ${at} WHERE id = ${change.id} AND user_id = ${caller.userId}`
          if (change.kind === "document") yield* unindexDocument(change.id)
        } else if (change.before !== null && change.after === null) {
          if (change.kind === "entity") {
            const clash = yield* sql<{ id: string }>`SELECT e.id FROM entities e JOIN entities r ON r.id = ${change.id}
              WHERE e.user_id = ${caller.userId} AND e.name = r.name AND e.deleted_at IS NULL`
            if (clash.length > 0) {
              return yield* new ValidationError({ detail: `cannot restore entity ${change.id}: its name is taken by ${clash[0].id}` })
            }
          }
          yield* sql`UPDATE ${sql(table)} SET deleted_at = NULL WHERE id = ${change.id} AND user_id = ${caller.userId}`
          if (change.kind === "document") yield* indexDocument(change.id)
        }
      }
      const compensating = changes.map((c) => ({ ...c, before: c.after, after: c.before }))
      const id = yield* journal(caller, "sophia.revert_mutation", compensating, mutationId)
      yield* sql`UPDATE mutations SET reverted_by = ${id} WHERE id = ${mutationId}`
      // reverting a revert re-applies the original, which may then be reverted again
      if (row.reverts !== null) yield* sql`UPDATE mutations SET reverted_by = NULL WHERE id = ${row.reverts}`
      return { mutation_id: id, reverted: mutationId, changes: changes.length }
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))

    // ------------------------------------------------------------------ reads

    /**
     * Full-text search (SQLite FTS5 with BM25, or Postgres tsvector + GIN with ts_rank; the title weighs 3×
     * the body), best match first, within the caller's scope: the same results on either store.
     */
    const search = Effect.fn("Knowledge.search")(function*(caller: Caller, input: SearchDocumentsInput) {
      const match = ftsQuery(input.query)
      const scope = yield* scopeIds(caller)
      if (match === undefined || (scope !== undefined && scope.length === 0)) return { items: [] as Array<DocumentHit> }
      const limit = input.limit ?? LIMITS.searchLimitDefault
      // two stages: rank inside the index (user and scope are unindexed columns of it), then snippets and
      // document fields for the top `limit` rows only (a snippet per match before sorting is the slow path)
      const rows = yield* sql.onDialectOrElse({
        // Postgres: the generated `documents.search` tsvector (title weight A, body B) under a GIN index
        // (migration 0005); ranked by ts_rank with the title at 3× the body, as BM25 weighs it on SQLite
        pg: () =>
          sql`WITH q AS (SELECT to_tsquery('simple', ${tsQuery(input.query)!}) AS q),
            top AS (
              SELECT d.id, ts_rank('{0, 0, 0.3333, 1.0}', d.search, q.q) AS score FROM documents d, q
              WHERE d.search @@ q.q AND d.user_id = ${caller.userId} AND d.deleted_at IS NULL
                ${scopeClause("d.entity_id", scope)}
              ORDER BY score DESC, d.id ${limitTo(sql, limit)}
            )
            SELECT d.id AS document_id, d.title AS title,
              ts_headline('simple', d.title || ' — ' || d.body, q.q,
                'StartSel=[, StopSel=], MaxWords=16, MinWords=4, ShortWord=1, FragmentDelimiter=…, MaxFragments=2') AS snippet,
              top.score AS score, d.uri AS uri, d.entity_id AS entity_id, d.created_at AS created_at
            FROM top JOIN documents d ON d.id = top.id, q
            ORDER BY top.score DESC, d.id`,
        orElse: () =>
          sql`WITH top AS (
              SELECT rowid AS rid, bm25(documents_fts, 0.0, 0.0, 0.0, 3.0, 1.0) AS rank FROM documents_fts
              WHERE documents_fts MATCH ${match} AND user_id = ${caller.userId} ${scopeClause("entity_id", scope)}
              ORDER BY rank ${limitTo(sql, limit)}
            )
            SELECT d.id AS document_id, d.title AS title,
              snippet(documents_fts, -1, '[', ']', '…', 16) AS snippet, -top.rank AS score,
              d.uri AS uri, d.entity_id AS entity_id, d.created_at AS created_at
            FROM top JOIN documents_fts ON documents_fts.rowid = top.rid
              JOIN documents d ON d.id = documents_fts.document_id
            WHERE documents_fts MATCH ${match}
            ORDER BY top.rank, d.id`
      }).pipe(Effect.flatMap(decodeHits))
      return { items: rows }
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))

    const decodeFactHits = Schema.decodeUnknown(Schema.Array(Schema.Struct({
      fact_id: Schema.String,
      subject: Schema.String,
      predicate: Schema.String,
      object: Schema.String,
      entity_id: Schema.NullOr(Schema.String),
      created_at: Schema.String,
      snippet: Schema.String,
      bm25: Schema.Number
    })))
    /**
     * Live facts matching the words (BM25 over subject, predicate and object; best first, `bm25` higher is
     * better), within the caller's entity scope. For `sophia.search`.
     */
    const searchFacts = Effect.fn("Knowledge.searchFacts")(function*(caller: Caller, text: string, limit: number) {
      const match = ftsQuery(text)
      const scope = yield* scopeIds(caller)
      if (match === undefined || (scope !== undefined && scope.length === 0)) return []
      return yield* sql.onDialectOrElse({
        pg: () =>
          sql`WITH q AS (SELECT to_tsquery('simple', ${tsQuery(text)!}) AS q)
            SELECT f.id AS fact_id, f.subject, f.predicate, f.object, f.entity_id, f.created_at,
              ts_headline('simple', f.subject || ' ' || f.predicate || ' ' || f.object, q.q,
                'StartSel=[, StopSel=], MaxWords=16, MinWords=4') AS snippet,
              ts_rank(f.search, q.q) AS bm25
            FROM facts f, q
            WHERE f.search @@ q.q AND f.user_id = ${caller.userId} AND f.deleted_at IS NULL ${scopeClause("f.entity_id", scope)}
            ORDER BY bm25 DESC, f.id
            ${limitTo(sql, limit)}`,
        orElse: () =>
          sql`WITH top AS (
              SELECT rowid AS rid, bm25(facts_fts) AS rank FROM facts_fts
              WHERE facts_fts MATCH ${match} AND user_id = ${caller.userId} ${scopeClause("entity_id", scope)}
              ORDER BY rank ${limitTo(sql, limit * 2)}
            )
            SELECT f.id AS fact_id, f.subject, f.predicate, f.object, f.entity_id, f.created_at,
              snippet(facts_fts, -1, '[', ']', '…', 16) AS snippet, -top.rank AS bm25
            FROM top JOIN facts_fts ON facts_fts.rowid = top.rid
              JOIN facts f ON f.id = facts_fts.fact_id
            WHERE facts_fts MATCH ${match} AND f.deleted_at IS NULL
            ORDER BY top.rank, f.id
            ${limitTo(sql, limit)}`
      }).pipe(Effect.flatMap(decodeFactHits))
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))

    /** Facts by subject / predicate (case-insensitive) and/or a substring of any part, each with its sources. */
    const query = Effect.fn("Knowledge.query")(function*(caller: Caller, input: QueryKnowledgeInput) {
      const scope = yield* scopeIds(caller)
      if (scope !== undefined && scope.length === 0) return { facts: [] as Array<FactRow> }
      const like = input.text !== undefined && input.text.length > 0
        ? `%${input.text.toLowerCase().replace(/[\\%_]/g, (c) => "\\" + c)}%`
        : undefined
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
          ${scopeClause("f.entity_id", scope)}
        ORDER BY f.created_at DESC, f.id
        ${limitTo(sql, input.limit ?? LIMITS.queryLimitDefault)}`.pipe(Effect.flatMap(decodeFacts))
      if (facts.length === 0) return { facts: [] as Array<FactRow> }
      const sources = yield* sql`SELECT
          fs.fact_id, d.id AS document_id, d.title, d.uri
        FROM fact_sources fs JOIN documents d ON d.id = fs.document_id AND d.deleted_at IS NULL
        WHERE fs.fact_id IN ${sql.in(facts.map((f) => f.id))} ${scopeClause("d.entity_id", scope)}
        ORDER BY d.id`.pipe(Effect.flatMap(decodeSources))
      const byFact = new Map<string, Array<{ document_id: string; title: string; uri: string | null }>>()
      for (const s of sources) {
        const list = byFact.get(s.fact_id) ?? []
        list.push({ document_id: s.document_id, title: s.title, uri: s.uri })
        byFact.set(s.fact_id, list)
      }
      return {
        facts: facts.map(({ id, ...f }): FactRow => ({ fact_id: id, ...f, sources: byFact.get(id) ?? [] }))
      }
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))

    /** The caller's journal, newest first (for the owner and tests). */
    const mutations = Effect.fn("Knowledge.mutations")(function*(caller: Caller, limit = 50) {
      const rows = yield* sql`SELECT * FROM mutations WHERE user_id = ${caller.userId}
        ORDER BY created_at DESC, id ${limitTo(sql, limit)}`.pipe(Effect.flatMap(decodeMutations))
      return rows.map((r) => ({ ...r, changes: decodeChanges(r.changes) }))
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))

    /**
     * How many live documents the user has, as one SQL expression: the count `countDocuments` gives a
     * caller with no entity scope (for a caller's combined probe: `Orient`).
     */
    const unscopedDocumentsExpr = (userId: string) =>
      sql`(SELECT COUNT(*) FROM documents WHERE user_id = ${userId} AND deleted_at IS NULL)`

    /** How many live documents the caller may read (its entity scope applied exactly as the read tools do). */
    const countDocuments = (caller: Caller) =>
      Effect.gen(function*() {
        const scope = yield* scopeIds(caller)
        if (scope !== undefined && scope.length === 0) return 0
        const [row] = yield* sql`SELECT COUNT(*) AS n FROM documents
          WHERE user_id = ${caller.userId} AND deleted_at IS NULL ${scopeClause("entity_id", scope)}`.pipe(
          Effect.flatMap(decodeCount)
        )
        return row.n
      }).pipe(Effect.orDie)

    return {
      createEntity,
      addDocument,
      importDocuments,
      submitClaimGraph,
      rememberFact,
      revert,
      search,
      searchFacts,
      query,
      mutations,
      countDocuments,
      unscopedDocumentsExpr
    } as const
  })
}) {}
