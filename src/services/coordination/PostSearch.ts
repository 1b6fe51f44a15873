import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { DbInt } from "../../domain/Time.js"
import { spanned } from "../Spans.js"
import { makeFullText } from "../store/FullText.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"

const decodePostRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  channel: Schema.String,
  channel_seq: DbInt,
  created_at: Schema.String,
  snippet: Schema.String
})))
const decodeTexts = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String, pos: DbInt, text: Schema.String })))
const decodePositions = Schema.decodeUnknown(Schema.Array(Schema.Struct({ user_id: Schema.String, last_pos: DbInt })))

/** At most this much of a post's body is embedded. */
const EMBED_CHARS = 4000

const decodePostHits = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  channel: Schema.String,
  channel_seq: DbInt,
  kind: Schema.String,
  connection_id: Schema.String,
  created_at: Schema.String,
  snippet: Schema.String,
  score: DbInt
})))

/**
 * The posts' full-text search (a module of the Coordination service, which returns its methods), through
 * `store/FullText.ts` like documents and facts. On SQLite a post is not indexed in its own transaction:
 * `posts_fts` follows `posts` in batches past the user's `posts_fts_progress` (the feed indexes them after
 * the posts commit, `SearchIndexFeed` in services/Search.ts) and `searchPosts` first indexes whatever of
 * the user's posts is still missing, so a search finds every committed post. Postgres indexes
 * `posts.search` itself. `sophia.search` ranks ids first (`rankPosts`) and reads the rows of its final page only
 * (`postHits`); the embedding feed reads posts past a position (`postsPast`, `postPositions`). Tables:
 * `posts_fts`, `posts_fts_progress`.
 */
export const makePostSearch = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements
  const fullText = yield* makeFullText
  const matches = fullText.matches("posts", ["channel", "channel_seq", "kind", "connection_id", "created_at"])
  const ranked = fullText.ranked("posts")
  const hitsOf = fullText.hits("posts", ["channel", "channel_seq", "created_at"])
  const past = family((limit: number) =>
    named("Coordination.postsPast", (p: { userId: string; after: number }) =>
      sql`SELECT id, pos, substr(body, 1, ${sql.literal(String(EMBED_CHARS))}) AS text FROM posts
        WHERE user_id = ${p.userId} AND pos > ${p.after} ORDER BY pos ${limitTo(sql, limit)}`))
  const positions = named("Coordination.postPositions", () => sql`SELECT user_id, last_pos FROM post_counters`)

  /** `sophia.search`'s first stage: the user's post ids ranked by BM25, best first (no snippet, no row read). */
  const rankPosts = spanned(
    "Coordination.rankPosts",
    Effect.fnUntraced(function*(caller: Caller, text: string, limit: number) {
      return yield* ranked({ userId: caller.userId, text, limit })
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** `sophia.search`'s final page: the user's posts of these ids, with snippets for the query's words. */
  const postHits = spanned(
    "Coordination.postHits",
    Effect.fnUntraced(function*(caller: Caller, text: string, refs: ReadonlyArray<{ id: string; ref: number | undefined }>) {
      const rows = yield* hitsOf({
        userId: caller.userId,
        text,
        ids: refs.map((r) => r.id),
        refs: refs.flatMap((r) => r.ref === undefined ? [] : [r.ref])
      })
      return yield* decodePostRows(rows)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** The embedding feed's source: a user's posts past a position, in position order (the start of each body). */
  const postsPast = spanned(
    "Coordination.postsPast",
    Effect.fnUntraced(function*(userId: string, after: number, limit: number) {
      return yield* Effect.flatMap(past(limit)({ userId, after }), decodeTexts)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** Every user's last post position (where the embedding feed has work). */
  const postPositions = spanned(
    "Coordination.postPositions",
    Effect.fnUntraced(function*() {
      return yield* Effect.flatMap(positions({}), decodePositions)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /**
   * Bring the full-text index up to date for these users, or for every user with unindexed posts when none
   * are named (a process starting on a file others wrote). Nothing on Postgres.
   */
  const indexPosts = (userIds?: Iterable<string>): Effect.Effect<void> => Effect.orDie(fullText.catchUpAll("posts", userIds))

  /**
   * The user's posts matching the words (BM25 over the body, best first, `bm25` higher is better), for
   * `sophia.search`. Posts are the user's fleet chatter: every connection of the user may find them (as
   * the inbox shows them), and they are never grounding. Every committed post of the user is searchable,
   * whoever wrote it and however recently.
   */
  const searchPosts = spanned(
    "Coordination.searchPosts",
    Effect.fnUntraced(function*(caller: Caller, text: string, limit: number) {
      const rows = yield* Effect.flatMap(matches({ userId: caller.userId, text, limit }), decodePostHits)
      return rows.map((r) => ({
        post_id: r.id,
        channel: r.channel,
        channel_seq: r.channel_seq,
        kind: r.kind,
        connection_id: r.connection_id,
        created_at: r.created_at,
        snippet: r.snippet,
        bm25: r.score
      }))
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  return { searchPosts, indexPosts, rankPosts, postHits, postsPast, postPositions } as const
})
