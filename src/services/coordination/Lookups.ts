import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { DbInt } from "../../domain/Time.js"
import { spanned } from "../Spans.js"
import { makeStatements } from "../store/Statements.js"
import { PostRef } from "./Rows.js"

/**
 * The small reads other services ask of Coordination (they never read its tables themselves): a user's
 * totals (`orient`), a channel's last seq and first matching post (a wait's predicate), which ids are posts
 * (a claim's source).
 */

const decodeTotals = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ posts: DbInt, channels: DbInt })))
const decodeLastSeq = Schema.decodeUnknown(Schema.Array(Schema.Struct({ last_seq: DbInt })))
const decodePostRefs = Schema.decodeUnknown(Schema.Array(PostRef))

/** The most ids `postIdsOf` checks with one prepared statement per count; longer lists are built each time. */
const IDS_SHAPED = 256

export const makeLookups = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, shaped } = yield* makeStatements

  const totalsOf = named("Coordination.totals", (p: { userId: string }) =>
    sql`SELECT (SELECT COALESCE(MAX(last_pos), 0) FROM post_counters WHERE user_id = ${p.userId}) AS posts,
      (SELECT COUNT(*) FROM channel_counters WHERE user_id = ${p.userId}) AS channels`)
  /** How many posts (every kind, archived channels too) and channels the user has (for `orient`), in one statement. */
  const totals = spanned("Coordination.totals", (userId: string): Effect.Effect<{ readonly posts: number; readonly channels: number }> =>
    totalsOf({ userId }).pipe(
      Effect.flatMap(decodeTotals),
      Effect.map(([{ channels, posts }]) => ({ posts, channels })),
      Effect.catchTag("SqlError", "ParseError", Effect.die)
    ))

  const lastSeqRow = named("Coordination.lastSeq", (p: { userId: string; channel: string }) =>
    sql`SELECT last_seq FROM channel_counters WHERE user_id = ${p.userId} AND channel = ${p.channel}`)
  /** The channel's last `channel_seq` (0 for a channel nothing was posted to). */
  const lastSeq = spanned("Coordination.lastSeq", (userId: string, channel: string): Effect.Effect<number> =>
    lastSeqRow({ userId, channel }).pipe(
      Effect.flatMap(decodeLastSeq),
      Effect.map((rows) => rows[0]?.last_seq ?? 0),
      Effect.catchTag("SqlError", "ParseError", Effect.die)
    ))

  /**
   * The first post of a channel after `afterSeq` (or exactly at `atSeq`), optionally by one author and
   * of one kind, other than `except`: how a wait reads whether its predicate already holds. (Its text
   * varies with the conditions asked: an ordinary statement, asked once per wait declared.)
   */
  const firstPost = spanned("Coordination.firstPost", (query: {
    readonly userId: string
    readonly channel: string
    readonly afterSeq?: number
    readonly atSeq?: number
    readonly from?: string
    readonly kind?: string
    readonly except?: string
  }): Effect.Effect<Option.Option<PostRef>> =>
    sql`SELECT id, user_id, connection_id, kind, channel, channel_seq FROM posts
      WHERE user_id = ${query.userId} AND channel = ${query.channel} AND channel_seq > ${query.afterSeq ?? 0}
        AND id <> ${query.except ?? ""}
        ${query.atSeq === undefined ? sql`` : sql`AND channel_seq = ${query.atSeq}`}
        ${query.from === undefined ? sql`` : sql`AND connection_id = ${query.from}`}
        ${query.kind === undefined ? sql`` : sql`AND kind = ${query.kind}`}
      ORDER BY channel_seq LIMIT 1`.pipe(
      Effect.flatMap(decodePostRefs),
      Effect.map((rows) => Option.fromNullable(rows[0])),
      Effect.catchTag("SqlError", "ParseError", Effect.die)
    ))

  const postsById = shaped("Coordination.postIdsOf", IDS_SHAPED, (p: { ids: ReadonlyArray<string> }) =>
    sql`SELECT id, user_id, connection_id, kind, channel, channel_seq FROM posts WHERE ${sql.in("id", p.ids)}`)
  /** Which of these ids are posts of the user (a claim's source that is a post is refused). */
  const postIdsOf = spanned("Coordination.postIdsOf", (userId: string, ids: ReadonlyArray<string>): Effect.Effect<ReadonlySet<string>> =>
    ids.length === 0
      ? Effect.succeed(new Set())
      : postsById({ ids }).pipe(
        Effect.flatMap(decodePostRefs),
        Effect.map((rows) => new Set(rows.filter((r) => r.user_id === userId).map((r) => r.id))),
        Effect.catchTag("SqlError", "ParseError", Effect.die)
      ))

  return { totals, lastSeq, firstPost, postIdsOf } as const
})
