import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../../domain/Auth.js"
import type { BeaconInput, BeaconResult, PostInput, PostWritten } from "../../domain/Coordination.js"
import { BEACON_CHANNEL, isArcChannel } from "../../domain/Coordination.js"
import { PostLanded } from "../../domain/Events.js"
import { DbInt, nowIso } from "../../domain/Time.js"
import { Auth } from "../Auth.js"
import { Events } from "../Events.js"
import { spanned } from "../Spans.js"
import { whenWritersConcurrent } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"
import type { makeChannelLifecycle } from "./Channels.js"
import type { makeReadMarks } from "./ReadMarks.js"
import type { makePostValidation } from "./Validation.js"

/**
 * Posting: a post (and a beacon, a heartbeat post) written in one transaction — the channel's and the
 * user's counters, the row, the author's own consumption, the channel's archive / re-open on a closeout,
 * and `PostLanded` published inside it. Tables written: `posts`, `channel_counters`, `post_counters` (and,
 * through the channel lifecycle and the read marks, `channels`, `inbox_state`, `inbox_channel_state`).
 */

const ChannelCounterRow = Schema.Struct({
  last_seq: DbInt,
  visible: DbInt,
  archived_at: Schema.optional(Schema.NullOr(Schema.String))
})
const decodeChannelCounter = Schema.decodeUnknown(Schema.Tuple(ChannelCounterRow))
const decodeLastPos = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ last_pos: DbInt })))
const decodeArchivedAt = Schema.decodeUnknown(Schema.Array(Schema.Struct({ archived_at: Schema.NullOr(Schema.String) })))

export interface PostingParts {
  readonly validation: Effect.Effect.Success<typeof makePostValidation>
  readonly channels: Effect.Effect.Success<typeof makeChannelLifecycle>
  readonly readMarks: Effect.Effect.Success<typeof makeReadMarks>
}

/** The write's statements, each made once. */
const makePostStatements = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements

  /** The channel's next seq, its visible count and (same statement) whether it is archived. */
  const bumpChannel = named(
    "Coordination.bumpChannel",
    (p: { userId: string; channel: string; visibleInc: number; now: string }) =>
      sql`INSERT INTO channel_counters (user_id, channel, last_seq, visible, last_post_at)
        VALUES (${p.userId}, ${p.channel}, 1, ${p.visibleInc}, ${p.now})
        ON CONFLICT (user_id, channel) DO UPDATE SET last_seq = channel_counters.last_seq + 1,
          visible = channel_counters.visible + excluded.visible, last_post_at = excluded.last_post_at
        RETURNING last_seq, visible, (SELECT ch.archived_at FROM channels ch
          WHERE ch.user_id = channel_counters.user_id AND ch.id = channel_counters.channel) AS archived_at`
  )
  /** Whether the channel is archived, as committed now. */
  const archivedAt = named("Coordination.archivedAt", (p: { userId: string; channel: string }) =>
    sql`SELECT archived_at FROM channels WHERE user_id = ${p.userId} AND id = ${p.channel}`)
  /** The user's next post position and its visible total. */
  const bumpUser = named("Coordination.bumpUser", (p: { userId: string; totalInc: number }) =>
    sql`INSERT INTO post_counters (user_id, last_pos, visible) VALUES (${p.userId}, 1, ${p.totalInc})
      ON CONFLICT (user_id) DO UPDATE SET last_pos = post_counters.last_pos + 1,
        visible = post_counters.visible + excluded.visible
      RETURNING last_pos`)
  const insertPost = named("Coordination.insertPost", (p: {
    id: string
    userId: string
    pos: number
    channel: string
    seq: number
    kind: string
    body: string
    refs: string
    payload: string | null
    author: string
    toSelector: string | null
    toConnection: string | null
    basedOnSeq: number | null
    now: string
  }) =>
    sql`INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, refs, payload, connection_id,
        to_selector, to_connection_id, based_on_seq, created_at)
      VALUES (${p.id}, ${p.userId}, ${p.pos}, ${p.channel}, ${p.seq}, ${p.kind}, ${p.body}, ${p.refs}, ${p.payload},
        ${p.author}, ${p.toSelector}, ${p.toConnection}, ${p.basedOnSeq}, ${p.now})`)

  return { archivedAt, bumpChannel, bumpUser, insertPost } as const
})

/** A closeout on an `arc:` channel archives it (or, asking for review, leaves / re-opens it); any other post re-opens it. */
const settleLifecycle = (
  channels: PostingParts["channels"],
  input: PostInput,
  reviewRequested: boolean | null,
  at: { readonly userId: string; readonly postId: string; readonly visible: number; readonly now: string },
  wasArchived: boolean
) =>
  Effect.gen(function*() {
    const { channel } = input
    if (input.kind === "closeout" && isArcChannel(channel)) {
      if (reviewRequested === false) {
        if (!wasArchived) yield* channels.archive(at.userId, channel, at.visible, at.postId, at.now)
        return { archived: true, warning: undefined }
      }
      if (wasArchived) {
        yield* channels.unarchive(at.userId, channel, at.visible, at.now)
        return {
          archived: false,
          warning: `channel ${channel} was archived and has been re-opened: this closeout requests review, ` +
            `so the arc awaits a verdict and stays open (and visible in inboxes) until a closeout without review_requested`
        }
      }
      return {
        archived: false,
        warning: `channel ${channel} was left open: this closeout requests review, so the arc awaits a verdict ` +
          `and is not archived (a closeout with review_requested: false archives it)`
      }
    }
    if (wasArchived) {
      yield* channels.unarchive(at.userId, channel, at.visible, at.now)
      return { archived: false, warning: `channel ${channel} was archived; this ${input.kind} post has re-opened it` }
    }
    return { archived: false, warning: undefined }
  })

export const makePosting = ({ channels, readMarks, validation }: PostingParts) =>
  Effect.gen(function*() {
    const auth = yield* Auth
    const events = yield* Events
    const sql = yield* SqlClient.SqlClient
    const { archivedAt, bumpChannel, bumpUser, insertPost } = yield* makePostStatements

    const write = (caller: Caller, input: PostInput) =>
      Effect.gen(function*() {
        const checked = yield* validation.validate(input)
        const userId = caller.userId
        const channel = input.channel
        const recipient = input.to === undefined ? null : yield* auth.resolve(userId, input.to)
        const now = yield* nowIso
        const id = `post-${randomUUID()}`

        const visibleInc = input.kind === "heartbeat" ? 0 : 1
        // the channel's next seq, its visible count and (same statement) whether it is archived
        const [counter] = yield* bumpChannel({ userId, channel, visibleInc, now }).pipe(Effect.flatMap(decodeChannelCounter))
        const seq = counter.last_seq
        // channel_seq is gapless and unique under concurrent writers by the upsert's row lock: a second
        // writer on the channel blocks on the counter row until this transaction ends and then increments
        // the committed value (a rollback hands its seq back). The first post of a channel has no row to lock
        // before its insert: it also takes the channel's advisory lock, the one a wait declared on this
        // channel holds (see `holdChannel`), so the wait and the post cannot miss each other.
        if (seq === 1) yield* channels.serializeChannel(userId, channel)
        let wasArchived = counter.archived_at !== null && counter.archived_at !== undefined
        // (Postgres) the upsert's RETURNING subquery reads the statement's snapshot, taken before it waited for
        // the counter row: a closeout that archived the channel (or a post that re-opened it) meanwhile
        // committed unseen. The row lock now held keeps every such post out: read the state again.
        yield* whenWritersConcurrent(
          sql,
          Effect.map(Effect.flatMap(archivedAt({ userId, channel }), decodeArchivedAt), (rows) => {
            wasArchived = (rows[0]?.archived_at ?? null) !== null
          })
        )
        const totalInc = visibleInc === 1 && !wasArchived ? 1 : 0
        const [user] = yield* bumpUser({ userId, totalInc }).pipe(Effect.flatMap(decodeLastPos))

        yield* insertPost({
          id,
          userId,
          pos: user.last_pos,
          channel,
          seq,
          kind: input.kind,
          body: input.body,
          refs: checked.refsJson,
          payload: checked.payloadJson,
          author: caller.connectionId,
          toSelector: input.to ?? null,
          toConnection: recipient?.connection_id ?? null,
          basedOnSeq: input.based_on_seq ?? null,
          now
        })

        // the author's own post is never unread for it
        if (visibleInc === 1) yield* readMarks.consumeOwnPost(userId, caller.connectionId, channel, totalInc)

        const { archived, warning } = yield* settleLifecycle(
          channels,
          input,
          checked.reviewRequested,
          { userId, postId: id, visible: counter.visible, now },
          wasArchived
        )

        // (constructed without re-validating: every field was just produced here, typed)
        yield* events.publish(
          new PostLanded({
            user_id: userId,
            post_id: id,
            channel,
            channel_seq: seq,
            kind: input.kind,
            author: caller.connectionId,
            to_connection_id: recipient?.connection_id ?? null,
            created_at: now,
            archived
          }, true)
        )
        const written: PostWritten = {
          post_id: id,
          channel,
          channel_seq: seq,
          created_at: now,
          ...(warning !== undefined ? { warning } : {}),
          archived
        }
        return written
      })

    /**
     * Write a post as `caller` (the author is always the caller) and return its receipt. Refusals:
     * `PayloadTooLarge`, `ValidationError`, `UnknownRecipient`, `AmbiguousRecipient`, with nothing
     * written. Safe to call inside another transaction (it then runs in a savepoint).
     */
    const post = spanned(
      "Coordination.post",
      (caller: Caller, input: PostInput) =>
        write(caller, input).pipe(events.transaction, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** A heartbeat post (channel `beacon` unless named) and the connection's last-seen time. */
    const beacon = spanned("Coordination.beacon", Effect.fnUntraced(function*(caller: Caller, input: BeaconInput) {
      const { archived: _, ...receipt } = yield* write(caller, {
        channel: input.channel ?? BEACON_CHANNEL,
        kind: "heartbeat",
        body: input.status ?? "alive"
      })
      yield* auth.touch(caller.connectionId)
      const result: BeaconResult = { ...receipt, last_seen_at: receipt.created_at }
      return result
    }, events.transaction, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    return { post, beacon } as const
  })
