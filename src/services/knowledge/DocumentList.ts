import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { DbInt } from "../../domain/Time.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"
import type { Entities } from "./Entities.js"

/** A document as a listing shows it: the start of its body, not the whole. */
export interface DocumentListed {
  readonly document_id: string
  readonly title: string
  readonly uri: string | null
  readonly entity_id: string | null
  readonly created_at: string
  /** the body's first `EXCERPT_CHARS` characters */
  readonly excerpt: string
  readonly body_chars: number
}

/** Where a page of the newest-first listing ends: the next page starts below this document. */
export interface DocumentCursor {
  readonly created_at: string
  readonly document_id: string
}

/** The most documents one page of the listing holds. */
export const DOCUMENT_PAGE_MAX = 200
const EXCERPT_CHARS = 240

const decodeListed = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  uri: Schema.NullOr(Schema.String),
  entity_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  excerpt: Schema.String,
  body_chars: DbInt
})))

type Key = `${number}/${"all" | "scoped"}/${"first" | "after"}`

/**
 * The documents listed without a search (the owner's portal): the caller's live documents within its
 * entity scope, newest first, a bounded page at a time below a cursor — exact across documents that share
 * a `created_at` (an import session's), ordered by (created_at, id) on either store.
 */
export const makeDocumentList = (entities: Entities) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { shaped } = yield* makeStatements

    // one statement per page size, scope (all, or these entities) and cursor (a LIMIT is text); each binds
    // only what its text holds: `scope` when scoped, `beforeAt`/`beforeId` after a cursor
    const newest = family((key: Key) => {
      const [limit, scoped, page] = key.split("/")
      return shaped(`Knowledge.newestDocuments.${scoped}.${page}`, 512, (p: {
        userId: string
        scope?: ReadonlyArray<string>
        beforeAt?: string
        beforeId?: string
      }) =>
        sql`SELECT id, title, uri, entity_id, created_at, substr(body, 1, ${sql.literal(String(EXCERPT_CHARS))}) AS excerpt,
            length(body) AS body_chars
          FROM documents WHERE user_id = ${p.userId} AND deleted_at IS NULL
          ${scoped === "scoped" ? sql`AND entity_id IN ${sql.in(p.scope!)}` : sql``}
          ${page === "after" ? sql`AND (created_at < ${p.beforeAt} OR (created_at = ${p.beforeAt} AND id < ${p.beforeId}))` : sql``}
          ORDER BY created_at DESC, id DESC ${limitTo(sql, Number(limit))}`)
    })

    /** A page of `limit` (1 to `DOCUMENT_PAGE_MAX`) below `before`; `next`: where the following page starts, null after the last. */
    const newestFirst = (caller: Caller, limit: number, before?: DocumentCursor) =>
      Effect.gen(function*() {
        const size = Math.max(1, Math.min(DOCUMENT_PAGE_MAX, Math.floor(limit)))
        const scope = yield* entities.scopeIds(caller)
        if (scope !== undefined && scope.length === 0) return { items: [], next: null }
        // one row more than the page: whether a next page exists, without a count
        const statement = newest(`${size + 1}/${scope === undefined ? "all" : "scoped"}/${before === undefined ? "first" : "after"}`)
        const rows = yield* Effect.flatMap(
          statement({
            userId: caller.userId,
            ...(scope !== undefined ? { scope } : {}),
            ...(before !== undefined ? { beforeAt: before.created_at, beforeId: before.document_id } : {})
          }),
          decodeListed
        )
        const items = rows.slice(0, size).map((r): DocumentListed => ({
          document_id: r.id,
          title: r.title,
          uri: r.uri,
          entity_id: r.entity_id,
          created_at: r.created_at,
          excerpt: r.excerpt,
          body_chars: r.body_chars
        }))
        const last = items[items.length - 1]
        const next: DocumentCursor | null = rows.length > size && last !== undefined
          ? { created_at: last.created_at, document_id: last.document_id }
          : null
        return { items, next }
      })

    return { newestFirst } as const
  })
