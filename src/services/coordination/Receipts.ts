import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { NotFound } from "../../domain/Errors.js"
import type { PostReceiptsResult, Recipient, TargetReceipt } from "../../domain/Receipts.js"
import { ReadVia } from "../../domain/Receipts.js"
import { DbInt } from "../../domain/Time.js"
import { Auth } from "../Auth.js"
import { spanned } from "../Spans.js"
import { makeStatements } from "../store/Statements.js"

/**
 * Receipts: who has had a post, for its author only. A receipt is the reader's read row (`reads`, written by
 * the read that consumed the post: `read_at`, and `via` — the inbox tool, a runtime's hook, a resource read),
 * so recording one costs nothing beyond the read itself. The readers of one post are found by primary key:
 * every connection with a read row has an `inbox_state` row (`ReadMarks.ts`), so the statement walks the
 * user's connections there and probes `reads` at (user, connection, the post's position) for each. The
 * target of a targeted post is listed even before it has read it (`read_at` and `via` null). A connection
 * that started caught up after the post (it never was unread for it) has not read it and is not listed.
 * Anyone but the author is told `not_found` ("no post of yours"): the receipts of a post are its author's.
 * The owner's portal asks `targetReceipts`: for a page of posts, whether each targeted one reached its target.
 */

const decodePost = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  pos: DbInt,
  connection_id: Schema.String,
  to_connection_id: Schema.NullOr(Schema.String)
})))
const decodeReaders = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  connection_id: Schema.String,
  read_at: Schema.String,
  via: ReadVia
})))
const decodeTargets = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  read_at: Schema.NullOr(Schema.String),
  via: Schema.NullOr(ReadVia)
})))

/** The largest page the portal shows (the inbox's largest page). */
const PAGE_POSTS = 200

export const makeReceipts = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const auth = yield* Auth
  const { named, shaped } = yield* makeStatements

  const postOf = named("Coordination.receiptPost", (p: { id: string; userId: string }) =>
    sql`SELECT pos, connection_id, to_connection_id FROM posts WHERE id = ${p.id} AND user_id = ${p.userId}`)
  const readersOf = named("Coordination.receiptReaders", (p: { userId: string; pos: number }) =>
    sql`SELECT r.connection_id, r.read_at, r.via FROM inbox_state s
      JOIN reads r ON r.user_id = s.user_id AND r.connection_id = s.connection_id AND r.pos = ${p.pos}
      WHERE s.user_id = ${p.userId}
      ORDER BY r.read_at, r.connection_id`)

  // the targeted posts among the listed ones, each with its target's read row (by primary key) if any
  const targetsOf = shaped("Coordination.targetReceipts", PAGE_POSTS + 1, (p: { userId: string; ids: ReadonlyArray<string> }) =>
    sql`SELECT p.id, r.read_at, r.via FROM posts p
      LEFT JOIN reads r ON r.user_id = p.user_id AND r.connection_id = p.to_connection_id AND r.pos = p.pos
      WHERE ${sql.in("p.id", p.ids)} AND p.user_id = ${p.userId} AND p.to_connection_id IS NOT NULL`)

  /** For the listed posts of a user, the receipt of each targeted one (by post id); untargeted ones are absent. */
  const targetReceipts = spanned(
    "Coordination.targetReceipts",
    (userId: string, postIds: ReadonlyArray<string>): Effect.Effect<ReadonlyMap<string, TargetReceipt>> =>
      postIds.length === 0
        ? Effect.succeed(new Map())
        : targetsOf({ userId, ids: [...new Set(postIds)] }).pipe(
          Effect.flatMap(decodeTargets),
          Effect.map((rows) => new Map(rows.map((r) => [r.id, { read_at: r.read_at, via: r.via }] as const))),
          Effect.catchTag("SqlError", "ParseError", Effect.die)
        )
  )

  const receipts = spanned(
    "Coordination.receipts",
    (caller: Caller, postId: string): Effect.Effect<PostReceiptsResult, NotFound> =>
      Effect.gen(function*() {
        const [post] = yield* Effect.flatMap(postOf({ id: postId, userId: caller.userId }), decodePost)
        if (post === undefined || post.connection_id !== caller.connectionId) {
          return yield* new NotFound({ what: "post of yours", id: postId })
        }
        const readers = yield* Effect.flatMap(readersOf({ userId: caller.userId, pos: post.pos }), decodeReaders)
        const target = post.to_connection_id
        const waiting = target !== null && !readers.some((r) => r.connection_id === target) ? [target] : []
        const names = yield* auth.names([...readers.map((r) => r.connection_id), ...waiting])
        const recipients: Array<Recipient> = [
          ...readers.map((r) => ({ connection_id: r.connection_id, agent_name: names.get(r.connection_id) ?? "", read_at: r.read_at, via: r.via })),
          ...waiting.map((id) => ({ connection_id: id, agent_name: names.get(id) ?? "", read_at: null, via: null }))
        ]
        return { post_id: postId, recipients }
      }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  return { receipts, targetReceipts } as const
})
