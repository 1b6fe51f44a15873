import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { AddDocumentInput, BeginImportSessionInput, DocumentHit, MutationChange, SearchDocumentsInput } from "../../domain/Knowledge.js"
import { LIMITS } from "../../domain/Knowledge.js"
import { DbInt, nowIso } from "../../domain/Time.js"
import type { FullText } from "../store/FullText.js"
import { makeStatements } from "../store/Statements.js"
import type { Entities } from "./Entities.js"
import { newId } from "./Journal.js"

const decodeHits = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  uri: Schema.NullOr(Schema.String),
  entity_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  snippet: Schema.String,
  score: DbInt
})))
const decodeCount = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ n: DbInt })))
const decodeCitable = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  entity_id: Schema.NullOr(Schema.String),
  deleted_at: Schema.NullOr(Schema.String)
})))

type NewDocument = { readonly title: string; readonly body: string; readonly uri?: string | undefined }

/**
 * Documents (`documents`, the only grounding sources) and import sessions (`import_sessions`). A document's
 * full-text index entry follows from `fullText.changed`, logged in the write's transaction.
 */
export const makeDocuments = (entities: Entities, fullText: FullText) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named, shaped } = yield* makeStatements

    const insertRow = named("Knowledge.insertDocument", (p: {
      id: string
      userId: string
      entityId: string | null
      title: string
      body: string
      uri: string | null
      importSessionId: string | null
      createdBy: string
      createdAt: string
    }) =>
      sql`INSERT INTO documents (id, user_id, entity_id, title, body, uri, import_session_id, created_by, created_at)
        VALUES (${p.id}, ${p.userId}, ${p.entityId}, ${p.title}, ${p.body}, ${p.uri}, ${p.importSessionId}, ${p.createdBy}, ${p.createdAt})`)
    const insertSession = named("Knowledge.insertImportSession", (p: {
      id: string
      userId: string
      connectionId: string
      entityId: string | null
      documentCount: number
      createdAt: string
    }) =>
      sql`INSERT INTO import_sessions (id, user_id, connection_id, entity_id, status, document_count, created_at)
        VALUES (${p.id}, ${p.userId}, ${p.connectionId}, ${p.entityId}, 'committed', ${p.documentCount}, ${p.createdAt})`)
    const byIds = shaped("Knowledge.documentsByIds", 512, (p: { ids: ReadonlyArray<string> }) =>
      sql`SELECT id, user_id, entity_id, deleted_at FROM documents WHERE id IN ${sql.in(p.ids)}`)
    const countAll = named("Knowledge.countDocuments", (p: { userId: string }) =>
      sql`SELECT COUNT(*) AS n FROM documents WHERE user_id = ${p.userId} AND deleted_at IS NULL`)
    const countInScope = shaped("Knowledge.countDocumentsInScope", 512, (p: { userId: string; scope: ReadonlyArray<string> }) =>
      sql`SELECT COUNT(*) AS n FROM documents WHERE user_id = ${p.userId} AND deleted_at IS NULL AND entity_id IN ${sql.in(p.scope)}`)
    const matches = fullText.matches("documents", ["title", "uri", "entity_id", "created_at"])

    /** One document's row; the journal's change for it. */
    const insert = (caller: Caller, doc: NewDocument, entityId: string | null, importSessionId: string | null, at: string) =>
      Effect.gen(function*() {
        const id = newId("doc")
        const uri = doc.uri ?? null
        yield* insertRow({
          id,
          userId: caller.userId,
          entityId,
          title: doc.title,
          body: doc.body,
          uri,
          importSessionId,
          createdBy: caller.connectionId,
          createdAt: at
        })
        const change: MutationChange = {
          kind: "document",
          id,
          before: null,
          after: { title: doc.title, uri, entity_id: entityId, body_chars: doc.body.length, created_at: at }
        }
        return change
      })

    /** A document (inside the caller's transaction); the journal's change. */
    const add = (caller: Caller, input: AddDocumentInput) =>
      Effect.gen(function*() {
        const entityId = yield* entities.resolve(caller, input.entity)
        const change = yield* insert(caller, input, entityId, null, yield* nowIso)
        yield* fullText.changed("documents", caller.userId, [change.id])
        return change
      })

    /**
     * A bounded batch of documents as one import session (inside the caller's transaction, so all or
     * nothing); their index entries are one logged change, indexed in batches like any other.
     */
    const importAll = (caller: Caller, input: BeginImportSessionInput) =>
      Effect.gen(function*() {
        const entityId = yield* entities.resolve(caller, input.entity)
        const sessionId = newId("imp")
        const at = yield* nowIso
        const changes: Array<MutationChange> = []
        for (const doc of input.documents) changes.push(yield* insert(caller, doc, entityId, sessionId, at))
        yield* fullText.changed("documents", caller.userId, changes.map((c) => c.id))
        yield* insertSession({
          id: sessionId,
          userId: caller.userId,
          connectionId: caller.connectionId,
          entityId,
          documentCount: changes.length,
          createdAt: at
        })
        return { sessionId, changes }
      })

    /** Of these ids, the documents the caller may cite (its live documents, inside its scope), each with its entity. */
    const citable = (caller: Caller, ids: ReadonlyArray<string>, scope: ReadonlyArray<string> | undefined) =>
      ids.length === 0
        ? Effect.succeed(new Map<string, string | null>())
        : Effect.map(Effect.flatMap(byIds({ ids }), decodeCitable), (rows) =>
          new Map(
            rows
              .filter((r) =>
                r.user_id === caller.userId && r.deleted_at === null &&
                (scope === undefined || (r.entity_id !== null && scope.includes(r.entity_id)))
              )
              .map((r) => [r.id, r.entity_id] as const)
          ))

    /**
     * Full-text search (SQLite FTS5 with BM25, or Postgres tsvector + GIN with ts_rank; the title weighs 3×
     * the body), best match first, within the caller's scope: the same results on either store.
     */
    const search = (caller: Caller, input: SearchDocumentsInput) =>
      Effect.gen(function*() {
        const scope = yield* entities.scopeIds(caller)
        const rows = yield* Effect.flatMap(
          matches({ userId: caller.userId, text: input.query, limit: input.limit ?? LIMITS.searchLimitDefault, scope }),
          decodeHits
        )
        const items = rows.map((r): DocumentHit => ({
          document_id: r.id,
          title: r.title,
          snippet: r.snippet,
          score: r.score,
          uri: r.uri,
          entity_id: r.entity_id,
          created_at: r.created_at
        }))
        return { items }
      })

    /** How many live documents the caller may read (its entity scope applied exactly as the read tools do). */
    const count = (caller: Caller) =>
      Effect.gen(function*() {
        const scope = yield* entities.scopeIds(caller)
        if (scope !== undefined && scope.length === 0) return 0
        const rows = scope === undefined
          ? yield* countAll({ userId: caller.userId })
          : yield* countInScope({ userId: caller.userId, scope })
        const [row] = yield* decodeCount(rows)
        return row.n
      })

    return { add, importAll, citable, search, count } as const
  })

export type Documents = Effect.Effect.Success<ReturnType<typeof makeDocuments>>
