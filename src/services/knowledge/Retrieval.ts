import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { DbInt } from "../../domain/Time.js"
import type { FullText } from "../store/FullText.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"
import type { Entities } from "./Entities.js"

/** The kinds of knowledge `sophia.search` retrieves. */
export type KnowledgeKind = "documents" | "facts"

/** A document or fact as `sophia.search` shows it on its final page. */
export interface KnowledgeHit {
  readonly id: string
  readonly title: string
  readonly snippet: string
  readonly entity_id: string | null
  readonly created_at: string
}

/** A row to embed, in the order the embedding feed reads them (`created_at`, then id). */
export interface KnowledgeText {
  readonly id: string
  readonly user_id: string
  readonly entity_id: string | null
  readonly text: string
  readonly created_at: string
}

/** Where the embedding feed stands in a kind: the last row it read. */
export interface TimeCursor {
  readonly at: string
  readonly id: string
}

const decodeDocuments = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  entity_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  snippet: Schema.String
})))
const decodeFacts = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  subject: Schema.String,
  predicate: Schema.String,
  object: Schema.String,
  entity_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  snippet: Schema.String
})))
const decodeTexts = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  entity_id: Schema.NullOr(Schema.String),
  text: Schema.String,
  created_at: Schema.String
})))
const decodeCount = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ n: DbInt })))

/** At most this much of a row's text is embedded (a provider's context is bounded; a title and the start say most). */
const EMBED_CHARS = 4000

/**
 * Documents and facts for `sophia.search`, in two stages (store/FullText.ts): ids ranked by BM25 within the
 * caller's scope, then the rows of the final page only, with their snippets. And what the embedding feed
 * reads: every document and fact (deleted ones too: a revert may restore them; search shows live rows
 * only) in (`created_at`, id) order, over the indexes of migration 0025.
 */
export const makeRetrieval = (entities: Entities, fullText: FullText) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named } = yield* makeStatements
    const ranked = { documents: fullText.ranked("documents"), facts: fullText.ranked("facts") }
    const hitsOf = {
      documents: fullText.hits("documents", ["title", "entity_id", "created_at"]),
      facts: fullText.hits("facts", ["subject", "predicate", "object", "entity_id", "created_at"])
    }

    /** The caller's BM25 list of a kind: ids best first, within its scope. */
    const rank = (caller: Caller, kind: KnowledgeKind, text: string, limit: number) =>
      Effect.flatMap(entities.scopeIds(caller), (scope) => ranked[kind]({ userId: caller.userId, text, limit, scope }))

    /** The rows of these ids the caller may read (live, in its scope), with snippets for the query's words. */
    const hits = (caller: Caller, kind: KnowledgeKind, text: string, refs: ReadonlyArray<{ id: string; ref: number | undefined }>) =>
      Effect.gen(function*() {
        const scope = yield* entities.scopeIds(caller)
        const rows = yield* hitsOf[kind]({
          userId: caller.userId,
          text,
          ids: refs.map((r) => r.id),
          refs: refs.flatMap((r) => r.ref === undefined ? [] : [r.ref]),
          scope
        })
        if (kind === "documents") {
          return (yield* decodeDocuments(rows)).map((r): KnowledgeHit => r)
        }
        return (yield* decodeFacts(rows)).map((r): KnowledgeHit => ({
          id: r.id,
          title: `${r.subject} ${r.predicate} ${r.object}`,
          snippet: r.snippet,
          entity_id: r.entity_id,
          created_at: r.created_at
        }))
      })

    const textOf: Record<KnowledgeKind, string> = {
      documents: `substr(title || ' — ' || body, 1, ${EMBED_CHARS})`,
      facts: "subject || ' ' || predicate || ' ' || object"
    }
    const pastStatement = (kind: KnowledgeKind) =>
      family((limit: number) =>
        named(`Knowledge.${kind}.textsPast`, (p: { at: string; id: string }) =>
          sql`SELECT id, user_id, entity_id, ${sql.literal(textOf[kind])} AS text, created_at FROM ${sql.literal(kind)}
            WHERE (created_at, id) > (${p.at}, ${p.id})
            ORDER BY created_at, id ${limitTo(sql, limit)}`))
    const past = { documents: pastStatement("documents"), facts: pastStatement("facts") }
    const countStatement = (kind: KnowledgeKind) =>
      named(`Knowledge.${kind}.countPast`, (p: { at: string; id: string }) =>
        sql`SELECT COUNT(*) AS n FROM ${sql.literal(kind)} WHERE (created_at, id) > (${p.at}, ${p.id})`)
    const counts = { documents: countStatement("documents"), facts: countStatement("facts") }

    /** The next rows of a kind after a cursor, every user's, oldest first (for the embedding feed). */
    const textsPast = (kind: KnowledgeKind, after: TimeCursor, limit: number) =>
      Effect.flatMap(past[kind](limit)(after), decodeTexts)

    /** How many rows of a kind lie past a cursor (the embedding backlog). */
    const countPast = (kind: KnowledgeKind, after: TimeCursor) =>
      Effect.map(Effect.flatMap(counts[kind](after), decodeCount), ([row]) => row.n)

    return { rank, hits, scope: entities.scopeIds, textsPast, countPast } as const
  })

export type Retrieval = Effect.Effect.Success<ReturnType<typeof makeRetrieval>>
