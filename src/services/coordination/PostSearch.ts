import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import type { ParseError } from "effect/ParseResult"
import type { Caller } from "../../domain/Auth.js"
import { ftsQuery, tsQuery } from "../../domain/Search.js"
import { DbInt } from "../../domain/Time.js"
import { spanned } from "../Spans.js"
import { limitTo, makeFixedStatements } from "../Statements.js"

/**
 * The posts' full-text search (a module of the Coordination service, which returns its methods).
 *
 * On SQLite a post is not indexed for `sophia.search` in its own transaction: `indexPosts` adds the
 * posts that landed to `posts_fts` in batches (wired in `layers/App.ts` on committed `PostLanded` events),
 * and `searchPosts` first indexes whatever of the user's posts is still missing, so a search finds every
 * committed post. Postgres indexes `posts.search` itself. Tables: `posts_fts`, `posts_fts_progress`.
 */
export const makePostSearch = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const fixed = yield* makeFixedStatements
  // ---- the posts' full-text index on SQLite (migration 0010): batches, not one segment per post ----
  const pg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
  const INDEX_BATCH = 1000
  const indexState = fixed((userId: string, sameUserId: string) =>
    sql`SELECT COALESCE((SELECT pos FROM posts_fts_progress WHERE user_id = ${userId}), 0) AS indexed,
      COALESCE((SELECT MAX(pos) FROM posts WHERE user_id = ${sameUserId}), 0) AS newest`)
  const decodeIndexState = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ indexed: DbInt, newest: DbInt })))
  const indexRange = fixed((userId: string, after: number, upTo: number) =>
    sql`INSERT INTO posts_fts (post_id, user_id, body) SELECT id, user_id, body FROM posts
      WHERE user_id = ${userId} AND pos > ${after} AND pos <= ${upTo} ORDER BY pos`)
  const indexedUpTo = fixed((userId: string, pos: number) =>
    sql`INSERT INTO posts_fts_progress (user_id, pos) VALUES (${userId}, ${pos})
      ON CONFLICT (user_id) DO UPDATE SET pos = excluded.pos`)
  /**
   * Index the user's next posts past its progress, at most `INDEX_BATCH`, rows and progress in one write
   * transaction (two processes indexing the same user serialize on it, and the second finds the work done).
   * How many of the user's posts are left unindexed after it.
   */
  const indexBatch = (userId: string) =>
    sql.withTransaction(Effect.gen(function*() {
      const [{ indexed, newest }] = yield* Effect.flatMap(indexState(userId, userId), decodeIndexState)
      if (newest <= indexed) return 0
      const upTo = Math.min(newest, indexed + INDEX_BATCH)
      yield* indexRange(userId, indexed, upTo)
      yield* indexedUpTo(userId, upTo)
      return newest - upTo
    }))
  /** Index every post of the user committed so far; free (one read, no write permit) when none is missing. */
  const indexPostsOf = (userId: string): Effect.Effect<void, SqlError | ParseError> =>
    Effect.flatMap(Effect.flatMap(indexState(userId, userId), decodeIndexState), ([{ indexed, newest }]) =>
      newest <= indexed
        ? Effect.void
        : Effect.flatMap(indexBatch(userId), (left) => left > 0 ? indexPostsOf(userId) : Effect.void))
  const usersBehind = fixed(() =>
    sql`SELECT c.user_id FROM post_counters c LEFT JOIN posts_fts_progress p ON p.user_id = c.user_id
      WHERE c.last_pos > COALESCE(p.pos, 0)`)
  const decodeUserIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ user_id: Schema.String })))
  /**
   * Bring the full-text index up to date for these users (those the `PostLanded` events named), or for
   * every user with unindexed posts when none are named (a process starting on a file others wrote).
   * Nothing on Postgres, whose `posts.search` is indexed by the database itself.
   */
  const indexPosts = (userIds?: Iterable<string>): Effect.Effect<void> =>
    pg ? Effect.void : Effect.gen(function*() {
      const users = userIds !== undefined ? [...userIds] : (yield* Effect.flatMap(usersBehind(), decodeUserIds)).map((r) => r.user_id)
      for (const userId of users) yield* indexPostsOf(userId)
    }).pipe(Effect.orDie)

  const decodePostHits = Schema.decodeUnknown(Schema.Array(Schema.Struct({
    post_id: Schema.String,
    channel: Schema.String,
    channel_seq: DbInt,
    kind: Schema.String,
    connection_id: Schema.String,
    created_at: Schema.String,
    snippet: Schema.String,
    bm25: Schema.Number
  })))
  /**
   * The user's posts matching the words (BM25 over the body, best first, `bm25` higher is better), for
   * `sophia.search`. Posts are the user's fleet chatter: every connection of the user may find them (as
   * the inbox shows them), and they are never grounding.
   */
  const searchPosts = spanned("Coordination.searchPosts", Effect.fnUntraced(function*(caller: Caller, text: string, limit: number) {
    const match = ftsQuery(text)
    if (match === undefined) return []
    // every committed post of the user is searchable, whoever wrote it and however recently
    if (!pg) yield* indexPostsOf(caller.userId)
    return yield* sql.onDialectOrElse({
      pg: () =>
        sql`WITH q AS (SELECT to_tsquery('simple', ${tsQuery(text)!}) AS q)
          SELECT p.id AS post_id, p.channel, p.channel_seq, p.kind, p.connection_id, p.created_at,
            ts_headline('simple', p.body, q.q, 'StartSel=[, StopSel=], MaxWords=16, MinWords=4') AS snippet,
            ts_rank(p.search, q.q) AS bm25
          FROM posts p, q
          WHERE p.search @@ q.q AND p.user_id = ${caller.userId}
          ORDER BY bm25 DESC, p.id
          ${limitTo(sql, limit)}`,
      orElse: () =>
        sql`WITH top AS (
            SELECT rowid AS rid, bm25(posts_fts) AS rank FROM posts_fts
            WHERE posts_fts MATCH ${match} AND user_id = ${caller.userId}
            ORDER BY rank ${limitTo(sql, limit)}
          )
          SELECT p.id AS post_id, p.channel, p.channel_seq, p.kind, p.connection_id, p.created_at,
            snippet(posts_fts, -1, '[', ']', '…', 16) AS snippet, -top.rank AS bm25
          FROM top JOIN posts_fts ON posts_fts.rowid = top.rid
            JOIN posts p ON p.id = posts_fts.post_id
          WHERE posts_fts MATCH ${match}
          ORDER BY top.rank, p.id`
    }).pipe(Effect.flatMap(decodePostHits))
  }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

  /** Whether `indexPosts` has anything to do on this store (SQLite: yes; Postgres indexes posts itself). */
  const postsIndexedInBatches = !pg
  return { searchPosts, indexPosts, postsIndexedInBatches } as const
})
