import type { Statement } from "@effect/sql"
import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Config, Duration, Effect, Option, Schema } from "effect"
import type { ParseError } from "effect/ParseResult"
import { randomUUID } from "node:crypto"
import type { Caller } from "../domain/Auth.js"
import { connectionShort } from "../domain/Auth.js"
import type {
  BeaconInput,
  BeaconResult,
  ChannelSummary,
  InboxInput,
  InboxResult,
  PostInput,
  PostKind,
  PostRow,
  PostWritten
} from "../domain/Coordination.js"
import { BEACON_CHANNEL, isArcChannel, PostKind as PostKindSchema } from "../domain/Coordination.js"
import { PayloadTooLarge, ValidationError } from "../domain/Errors.js"
import type { DomainEvent } from "../domain/Events.js"
import { PostLanded } from "../domain/Events.js"
import { DbInt, nowIso } from "../domain/Time.js"
import { Auth } from "./Auth.js"
import { makePostSearch } from "./coordination/PostSearch.js"
import { forUpdate, serialize } from "./Dialect.js"
import { Events } from "./Events.js"
import { spanned } from "./Spans.js"
import { limitTo, makeFixedStatements, perCount, rowsOf } from "./Statements.js"
import { makeStatements } from "./store/Statements.js"
import { Wakeups } from "./Wakeups.js"

/**
 * Coordination: typed posts, the per-connection inbox, and the lifecycle of `arc:` channels.
 *
 * Counting. `unreadCount` runs on every response of every tool, so it is two primary-key lookups:
 * `post_counters.visible` (the user's non-heartbeat posts in non-archived channels) minus
 * `inbox_state.consumed` (those of them that are the connection's own or that it has read). Both are
 * maintained inside the write transactions that change them: a post, a read that marks rows, and an
 * archive / un-archive (which moves a whole channel's per-connection counts in or out of the totals;
 * rare, O(connections that touched the channel)). The test suite checks the counters against the plain
 * anti-join definition after random operations.
 *
 * Inbox scans. The default view (unread only) is an anti-join against `reads`, bounded below by a
 * per-connection low-water mark (`inbox_state.lwm`, a post position below which nothing is unread in
 * the default view; per channel `inbox_channel_state.lwm_pos`, the same within one channel). A marking
 * read that saw everything up to some position advances it; re-opening a channel lowers the global one
 * again for connections that had not read all of it. Indexes: (user_id, pos) and (user_id, channel, pos).
 *
 * Order. Each post gets the user's next position `pos` (allocated, like `channel_seq`, from a counter
 * row updated in the insert's transaction); the inbox is ordered by it, which within a channel is the
 * `channel_seq` order, and the cursor is a position.
 *
 * Events. Each post publishes `PostLanded` inside its write transaction, right after the row and its
 * channel lifecycle are written: the subscribers wired in `layers/App.ts` (a wait resolved by the post,
 * the ledger's observation of a closeout) commit or roll back with it. `post` may be called inside the
 * caller's own transaction (it then runs in a savepoint).
 *
 * Search. On SQLite a post is not indexed for `sophia.search` in its own transaction: `indexPosts` adds the
 * posts that landed to `posts_fts` in batches (wired in `layers/App.ts` on committed `PostLanded` events),
 * and `searchPosts` first indexes whatever of the user's posts is still missing, so a search finds every
 * committed post. Postgres indexes `posts.search` itself.
 *
 * Ownership. This service owns `posts`, `reads`, `channels`, `channel_counters`, `post_counters`,
 * `inbox_state`, `inbox_channel_state`, `posts_fts`, `posts_fts_progress`; agent names are joined live
 * through `Auth.connections`.
 */

const DbPostRow = Schema.Struct({
  id: Schema.String,
  pos: DbInt,
  channel: Schema.String,
  channel_seq: DbInt,
  kind: PostKindSchema,
  body: Schema.String,
  // the stored JSON texts, parsed when a row becomes a PostRow (`storedRefs`, `storedPayload`): most posts
  // carry "[]" and no payload, and a page decodes twice as fast without a JSON transformation per row
  refs: Schema.String,
  payload: Schema.NullOr(Schema.String),
  connection_id: Schema.String,
  to_selector: Schema.NullOr(Schema.String),
  to_connection_id: Schema.NullOr(Schema.String),
  based_on_seq: Schema.NullOr(DbInt),
  created_at: Schema.String,
  is_read: DbInt,
  archived: DbInt
})
type DbPostRow = typeof DbPostRow.Type
const decodePostRows = Schema.decodeUnknown(Schema.Array(DbPostRow))
// (a stored text that does not decode is a defect, as a row that does not decode is)
const decodeRefs = Schema.decodeSync(Schema.parseJson(Schema.Array(Schema.String)))
const decodePayload = Schema.decodeSync(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })))
const storedRefs = (text: string): ReadonlyArray<string> => (text === "[]" ? [] : decodeRefs(text))
const storedPayload = (text: string | null) => (text === null ? null : decodePayload(text))

const DbChannelRow = Schema.Struct({
  channel: Schema.String,
  last_seq: DbInt,
  unread: DbInt,
  last_post_at: Schema.String,
  archived: DbInt,
  total_unread: DbInt
})
const decodeChannelRows = Schema.decodeUnknown(Schema.Array(DbChannelRow))

const ChannelCounterRow = Schema.Struct({
  last_seq: DbInt,
  visible: DbInt,
  archived_at: Schema.optional(Schema.NullOr(Schema.String))
})
const decodeChannelCounter = Schema.decodeUnknown(Schema.Tuple(ChannelCounterRow))
const decodeLastPos = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ last_pos: DbInt })))
const decodeMarks = Schema.decodeUnknown(
  Schema.Tuple(Schema.Struct({ lwm: Schema.NullOr(DbInt), last_pos: Schema.NullOr(DbInt) }))
)
const decodeOptionalNumber = Schema.decodeUnknown(Schema.Array(Schema.Struct({ n: Schema.NullOr(DbInt) })))

/** A post as other services ask about it (a wait's predicate, a claim's source). */
export const PostRef = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  connection_id: Schema.String,
  kind: PostKindSchema,
  channel: Schema.String,
  channel_seq: DbInt
})
export type PostRef = typeof PostRef.Type

const CURSOR = /^p(\d{1,15})$/
const encodeCursor = (pos: number) => `p${pos}`

const MAX_CHANNELS_LISTED = 100
const DEFAULT_INBOX_LIMIT = 50

/** Nesting depth of a JSON value (a scalar is 0, `{}` is 1); stops counting past `cap` (cycles, abuse). */
const jsonDepth = (value: unknown, cap: number): number => {
  if (value === null || typeof value !== "object") return 0
  if (cap <= 0) return 1
  let deepest = 0
  for (const v of Object.values(value as object)) {
    const d = jsonDepth(v, cap - 1)
    if (d > deepest) deepest = d
    if (deepest >= cap) break
  }
  return 1 + deepest
}

const intConfig = (name: string, fallback: number) => Config.integer(name).pipe(Config.withDefault(fallback))

export class Coordination extends Effect.Service<Coordination>()("sophia/Coordination", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const events = yield* Events
    const wakeups = yield* Wakeups
    const fixed = yield* makeFixedStatements
    const limits = yield* Effect.orDie(Config.all({
      bodyBytes: intConfig("SOPHIA_POST_BODY_MAX_BYTES", 32 * 1024),
      payloadBytes: intConfig("SOPHIA_POST_PAYLOAD_MAX_BYTES", 8 * 1024),
      payloadDepth: intConfig("SOPHIA_POST_PAYLOAD_MAX_DEPTH", 8),
      references: intConfig("SOPHIA_POST_REFERENCES_MAX", 32),
      referenceChars: intConfig("SOPHIA_POST_REFERENCE_MAX_CHARS", 512),
      inboxLimit: intConfig("SOPHIA_INBOX_LIMIT_MAX", 200)
    }))

    // ---- validation (before anything is written) ----

    const validate = (input: PostInput) =>
      Effect.gen(function*() {
        const bodyBytes = Buffer.byteLength(input.body, "utf8")
        if (bodyBytes > limits.bodyBytes) {
          return yield* new PayloadTooLarge({ what: "body", limit: limits.bodyBytes, actual: bodyBytes, unit: "bytes" })
        }
        if (input.body.trim().length === 0) return yield* new ValidationError({ detail: "body: must not be blank" })
        const refs = input.references ?? []
        if (refs.length > limits.references) {
          return yield* new PayloadTooLarge({
            what: "references",
            limit: limits.references,
            actual: refs.length,
            unit: "items"
          })
        }
        for (const [i, ref] of refs.entries()) {
          if (ref.length > limits.referenceChars) {
            return yield* new PayloadTooLarge({
              what: `references[${i}]`,
              limit: limits.referenceChars,
              actual: ref.length,
              unit: "characters"
            })
          }
          if (ref.trim().length === 0) return yield* new ValidationError({ detail: `references[${i}]: must not be blank` })
        }
        let reviewRequested: boolean | null = null
        const rawCloseout = input.payload?.closeout
        const payloadCloseout = typeof rawCloseout === "object" && rawCloseout !== null && !Array.isArray(rawCloseout)
          ? rawCloseout as { readonly review_requested?: unknown }
          : undefined
        const fromPayload = payloadCloseout?.review_requested
        if (input.kind === "closeout") {
          const given = input.closeout?.review_requested ?? fromPayload
          if (typeof given !== "boolean") {
            return yield* new ValidationError({
              detail: "closeout.review_requested (a boolean) is required on a closeout; it is never inferred"
            })
          }
          if (input.closeout !== undefined && fromPayload !== undefined && fromPayload !== input.closeout.review_requested) {
            return yield* new ValidationError({ detail: "closeout.review_requested and payload.closeout.review_requested disagree" })
          }
          reviewRequested = given
        } else if (input.closeout !== undefined) {
          return yield* new ValidationError({ detail: `closeout: only a closeout post carries it (kind is ${input.kind})` })
        }
        const payload = reviewRequested === null
          ? input.payload
          : { ...input.payload, closeout: { ...payloadCloseout, review_requested: reviewRequested } }
        let payloadJson: string | null = null
        if (payload !== undefined) {
          const depth = jsonDepth(payload, limits.payloadDepth + 1)
          if (depth > limits.payloadDepth) {
            return yield* new ValidationError({ detail: `payload: nests deeper than ${limits.payloadDepth} levels` })
          }
          payloadJson = JSON.stringify(payload)
          const bytes = Buffer.byteLength(payloadJson, "utf8")
          if (bytes > limits.payloadBytes) {
            return yield* new PayloadTooLarge({ what: "payload", limit: limits.payloadBytes, actual: bytes, unit: "bytes (JSON)" })
          }
        }
        return { refsJson: JSON.stringify(refs), payloadJson, reviewRequested }
      })

    // ---- channel lifecycle (inside the write transaction) ----

    const channelKey = (userId: string, channel: string) => `channel/${userId}/${channel}`

    /**
     * Inside the caller's transaction: no post lands on the channel until it ends, and every post that
     * landed before is visible to the caller's next statements. A wait being declared holds it, so a post
     * either lands before (the declaration reads it) or after (the post's hook sees the committed wait).
     * Postgres: the channel's advisory lock (for a channel with no post yet; see `write`) and the counter
     * row `FOR UPDATE` (every later post takes that row first). SQLite: nothing (one writer).
     */
    const holdChannel = (userId: string, channel: string) =>
      Effect.gen(function*() {
        yield* serialize(sql, channelKey(userId, channel))
        yield* sql`SELECT last_seq FROM channel_counters WHERE user_id = ${userId} AND channel = ${channel} ${forUpdate(sql)}`
      }).pipe(Effect.orDie)

    /** Take a channel's counts out of the user's and every connection's totals. */
    const archive = (userId: string, channel: string, visible: number, postId: string, now: string) =>
      Effect.gen(function*() {
        yield* sql`INSERT INTO channels (user_id, id, archived_at, archived_by_post, updated_at)
          VALUES (${userId}, ${channel}, ${now}, ${postId}, ${now})
          ON CONFLICT (user_id, id) DO UPDATE SET archived_at = ${now}, archived_by_post = ${postId}, updated_at = ${now}`
        yield* sql`UPDATE post_counters SET visible = visible - ${visible} WHERE user_id = ${userId}`
        yield* sql`UPDATE inbox_state SET consumed = consumed - (SELECT ics.consumed FROM inbox_channel_state ics
            WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id AND ics.channel = ${channel})
          WHERE user_id = ${userId} AND EXISTS (SELECT 1 FROM inbox_channel_state ics
            WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id AND ics.channel = ${channel})`
      })

    /** Put a channel's counts back, and lower the scan mark of connections that have unread posts in it. */
    const unarchive = (userId: string, channel: string, visible: number, now: string) =>
      Effect.gen(function*() {
        yield* sql`UPDATE channels SET archived_at = NULL, archived_by_post = NULL, updated_at = ${now}
          WHERE user_id = ${userId} AND id = ${channel}`
        yield* sql`UPDATE post_counters SET visible = visible + ${visible} WHERE user_id = ${userId}`
        yield* sql`UPDATE inbox_state SET consumed = consumed + (SELECT ics.consumed FROM inbox_channel_state ics
            WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id AND ics.channel = ${channel})
          WHERE user_id = ${userId} AND EXISTS (SELECT 1 FROM inbox_channel_state ics
            WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id AND ics.channel = ${channel})`
        const first = yield* sql`SELECT MIN(pos) AS n FROM posts
          WHERE user_id = ${userId} AND channel = ${channel}`.pipe(Effect.flatMap(decodeOptionalNumber))
        const below = (first[0]?.n ?? 1) - 1
        yield* sql`UPDATE inbox_state SET lwm = CASE WHEN lwm < ${below} THEN lwm ELSE ${below} END
          WHERE user_id = ${userId} AND lwm > ${below} AND NOT EXISTS (SELECT 1 FROM inbox_channel_state ics
            WHERE ics.user_id = inbox_state.user_id AND ics.connection_id = inbox_state.connection_id
              AND ics.channel = ${channel} AND ics.consumed >= ${visible})`
      })

    // ---- the write: its fixed statements (see Statements.ts), each parameter used once ----

    /** The channel's next seq, its visible count and (same statement) whether it is archived. */
    const bumpChannel = fixed((userId: string, channel: string, visibleInc: number, now: string) =>
      sql`INSERT INTO channel_counters (user_id, channel, last_seq, visible, last_post_at)
        VALUES (${userId}, ${channel}, 1, ${visibleInc}, ${now})
        ON CONFLICT (user_id, channel) DO UPDATE SET last_seq = channel_counters.last_seq + 1,
          visible = channel_counters.visible + excluded.visible, last_post_at = excluded.last_post_at
        RETURNING last_seq, visible, (SELECT ch.archived_at FROM channels ch
          WHERE ch.user_id = channel_counters.user_id AND ch.id = channel_counters.channel) AS archived_at`)
    /** The user's next post position and its visible total. */
    const bumpUser = fixed((userId: string, totalInc: number) =>
      sql`INSERT INTO post_counters (user_id, last_pos, visible) VALUES (${userId}, 1, ${totalInc})
        ON CONFLICT (user_id) DO UPDATE SET last_pos = post_counters.last_pos + 1,
          visible = post_counters.visible + excluded.visible
        RETURNING last_pos`)
    const insertPost = fixed((
      id: string,
      userId: string,
      pos: number,
      channel: string,
      seq: number,
      kind: string,
      body: string,
      refs: string,
      payload: string | null,
      author: string,
      toSelector: string | null,
      toConnection: string | null,
      basedOnSeq: number | null,
      now: string
    ) =>
      sql`INSERT INTO posts (id, user_id, pos, channel, channel_seq, kind, body, refs, payload, connection_id,
          to_selector, to_connection_id, based_on_seq, created_at)
        VALUES (${id}, ${userId}, ${pos}, ${channel}, ${seq}, ${kind}, ${body}, ${refs}, ${payload}, ${author},
          ${toSelector}, ${toConnection}, ${basedOnSeq}, ${now})`)
    /** `n` more of the channel's posts are consumed (own or read) by the connection. */
    const consumeInChannel = fixed((userId: string, connectionId: string, channel: string, n: number) =>
      sql`INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos)
        VALUES (${userId}, ${connectionId}, ${channel}, ${n}, 0)
        ON CONFLICT (user_id, connection_id, channel) DO UPDATE
          SET consumed = inbox_channel_state.consumed + excluded.consumed`)
    /** `n` more of the user's visible posts are consumed by the connection. */
    const consumeInTotal = fixed((userId: string, connectionId: string, n: number) =>
      sql`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (${userId}, ${connectionId}, ${n}, 0)
        ON CONFLICT (user_id, connection_id) DO UPDATE SET consumed = inbox_state.consumed + excluded.consumed`)

    // ---- the write ----

    const write = (caller: Caller, input: PostInput) =>
      Effect.gen(function*() {
        const checked = yield* validate(input)
        const userId = caller.userId
        const channel = input.channel
        const recipient = input.to === undefined ? null : yield* auth.resolve(userId, input.to)
        const now = yield* nowIso
        const id = `post-${randomUUID()}`

        const visibleInc = input.kind === "heartbeat" ? 0 : 1
        // the channel's next seq, its visible count and (same statement) whether it is archived
        const [counter] = yield* bumpChannel(userId, channel, visibleInc, now).pipe(Effect.flatMap(decodeChannelCounter))
        const seq = counter.last_seq
        // channel_seq is gapless and unique under concurrent writers by the upsert's row lock: a second
        // writer on the channel blocks on the counter row until this transaction ends and then increments
        // the committed value (a rollback hands its seq back). The first post of a channel has no row to lock
        // before its insert: it also takes the channel's advisory lock, the one a wait declared on this
        // channel holds (see `holdChannel`), so the wait and the post cannot miss each other.
        if (seq === 1) yield* serialize(sql, channelKey(userId, channel))
        const channelVisible = counter.visible
        const wasArchived = counter.archived_at !== null && counter.archived_at !== undefined
        const totalInc = visibleInc === 1 && !wasArchived ? 1 : 0
        const [user] = yield* bumpUser(userId, totalInc).pipe(Effect.flatMap(decodeLastPos))
        const pos = user.last_pos

        yield* insertPost(id, userId, pos, channel, seq, input.kind, input.body, checked.refsJson, checked.payloadJson,
          caller.connectionId, input.to ?? null, recipient?.connection_id ?? null, input.based_on_seq ?? null, now)

        // the author's own post is never unread for it
        if (visibleInc === 1) {
          yield* consumeInChannel(userId, caller.connectionId, channel, 1)
          // (an inbox_state row exists wherever an inbox_channel_state row does: archive moves counts between them)
          yield* consumeInTotal(userId, caller.connectionId, totalInc)
        }

        let archived = wasArchived
        let warning: string | undefined
        if (input.kind === "closeout" && isArcChannel(channel)) {
          if (checked.reviewRequested === false) {
            if (!wasArchived) {
              yield* archive(userId, channel, channelVisible, id, now)
              archived = true
            }
          } else if (wasArchived) {
            yield* unarchive(userId, channel, channelVisible, now)
            archived = false
            warning = `channel ${channel} was archived and has been re-opened: this closeout requests review, ` +
              `so the arc awaits a verdict and stays open (and visible in inboxes) until a closeout without review_requested`
          } else {
            warning = `channel ${channel} was left open: this closeout requests review, so the arc awaits a verdict ` +
              `and is not archived (a closeout with review_requested: false archives it)`
          }
        } else if (wasArchived) {
          yield* unarchive(userId, channel, channelVisible, now)
          archived = false
          warning = `channel ${channel} was archived; this ${input.kind} post has re-opened it`
        }

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

    // ---- reading ----

    /**
     * The caller's global unread count: one statement, two primary-key lookups. It runs on every response
     * of every tool, so it is deliberately not wrapped in its own span. `unreadExpr` is the same count as
     * one SQL expression (parameters: user, user, connection), for the envelope's one probe that reads it
     * beside the waits' flags (layers/App.ts).
     */
    const unreadExpr = (userId: string, sameUserId: string, connectionId: string) =>
      sql`(COALESCE((SELECT visible FROM post_counters WHERE user_id = ${userId}), 0)
        - COALESCE((SELECT consumed FROM inbox_state WHERE user_id = ${sameUserId} AND connection_id = ${connectionId}), 0))`
    const unreadQuery = fixed((userId: string, sameUserId: string, connectionId: string) =>
      sql`SELECT ${unreadExpr(userId, sameUserId, connectionId)} AS n`)
    const unreadCount = (caller: Caller): Effect.Effect<number> =>
      unreadQuery(caller.userId, caller.userId, caller.connectionId).pipe(
        Effect.flatMap(decodeOptionalNumber),
        Effect.map((rows) => rows[0]?.n ?? 0),
        Effect.orDie
      )

    /** A page of the posts `where` selects (conditions joined by AND), with the reader's read marks joined. */
    const postsPage = (connectionId: string, where: ReadonlyArray<Statement.Fragment>, limit: number, newest: boolean) =>
      sql`SELECT p.id, p.pos, p.channel, p.channel_seq, p.kind, p.body, p.refs, p.payload, p.connection_id,
          p.to_selector, p.to_connection_id, p.based_on_seq, p.created_at,
          CASE WHEN r.post_id IS NULL THEN 0 ELSE 1 END AS is_read,
          CASE WHEN ch.archived_at IS NULL THEN 0 ELSE 1 END AS archived
        FROM posts p
        LEFT JOIN reads r ON r.user_id = p.user_id AND r.connection_id = ${connectionId} AND r.pos = p.pos
        LEFT JOIN channels ch ON ch.user_id = p.user_id AND ch.id = p.channel
        WHERE ${sql.and(where)}
        ORDER BY p.pos ${newest ? sql.literal("DESC") : sql.literal("ASC")}
        ${limitTo(sql, limit)}`
    /** What a page shows, as the inbox's input asks (`after`: the position the page starts past). */
    interface PageFilter {
      readonly userId: string
      readonly connectionId: string
      readonly after: number
      readonly channel?: string | undefined
      readonly withArchived: boolean
      readonly kinds?: ReadonlyArray<string> | undefined
      readonly withHeartbeats: boolean
      readonly unreadOnly: boolean
      readonly beforeSeq?: number | undefined
    }
    const pageConditions = (f: PageFilter) => {
      const where = [sql`p.user_id = ${f.userId}`, sql`p.pos > ${f.after}`]
      if (f.channel !== undefined) {
        where.push(sql`p.channel = ${f.channel}`)
      } else if (!f.withArchived) {
        where.push(sql`ch.archived_at IS NULL`)
      }
      if (f.kinds !== undefined) where.push(sql`p.kind IN ${sql.in(f.kinds)}`)
      if (!f.withHeartbeats && !(f.kinds?.includes("heartbeat") ?? false)) where.push(sql`p.kind <> 'heartbeat'`)
      if (f.unreadOnly) {
        where.push(sql`p.connection_id <> ${f.connectionId}`)
        where.push(sql`r.post_id IS NULL`)
      }
      if (f.beforeSeq !== undefined) where.push(sql`p.channel_seq < ${f.beforeSeq}`)
      return where
    }
    /** The plain unread inbox (no channel, kind, heartbeat, archive or seq asked for): most reads are it. */
    const isPlainUnread = (f: PageFilter) =>
      f.unreadOnly && f.channel === undefined && !f.withArchived && f.kinds === undefined && !f.withHeartbeats &&
      f.beforeSeq === undefined
    // its page as a fixed statement (Statements.ts), one per page size
    const unreadPages = new Map<number, (me: string, userId: string, after: number, meAgain: string) => Effect.Effect<ReadonlyArray<unknown>, SqlError>>()
    const unreadPage = (limit: number) => {
      let page = unreadPages.get(limit)
      if (page === undefined) {
        unreadPages.set(limit, page = fixed((me: string, userId: string, after: number, meAgain: string) =>
          postsPage(me, pageConditions({ userId, connectionId: meAgain, after, withArchived: false, withHeartbeats: false, unreadOnly: true }), limit, false)))
      }
      return page
    }
    const decodePage = (newest: boolean) => <E>(page: Effect.Effect<ReadonlyArray<unknown>, E>) =>
      page.pipe(
        Effect.flatMap(decodePostRows),
        Effect.map((rows) => newest ? [...rows].reverse() : rows),
        Effect.orDie
      )

    /** Names are joined live (a rename relabels past posts), through Auth in one statement per page. */
    const toPostRows = (caller: Caller, rows: ReadonlyArray<DbPostRow>) =>
      Effect.map(
        auth.names(rows.flatMap((r) => r.to_connection_id === null ? [r.connection_id] : [r.connection_id, r.to_connection_id])),
        (names) =>
          rows.map((row) =>
            toPostRow(
              caller,
              row,
              names.get(row.connection_id) ?? "",
              row.to_connection_id === null ? null : names.get(row.to_connection_id) ?? null
            )
          )
      )

    const toPostRow = (caller: Caller, row: DbPostRow, agentName: string, toAgentName: string | null): PostRow => ({
      post_id: row.id,
      channel: row.channel,
      channel_seq: row.channel_seq,
      kind: row.kind,
      body: row.body,
      references: storedRefs(row.refs),
      payload: storedPayload(row.payload),
      connection_id: row.connection_id,
      connection_short: connectionShort(row.connection_id),
      agent_name: agentName,
      to: row.to_selector,
      to_connection_id: row.to_connection_id,
      to_agent_name: toAgentName,
      based_on_seq: row.based_on_seq,
      behind_by: row.based_on_seq === null ? null : Math.max(0, row.channel_seq - 1 - row.based_on_seq),
      mine: row.connection_id === caller.connectionId,
      unread: row.connection_id !== caller.connectionId && row.is_read === 0,
      created_at: row.created_at
    })

    /**
     * A read's settlement of one channel's state: `n` more of its posts consumed and, when `advance` is 1,
     * the channel's scan mark moved to `lwmPos` — one upsert for both.
     */
    const settleChannel = fixed((
      userId: string,
      connectionId: string,
      channel: string,
      n: number,
      lwmPos: number,
      advance: number
    ) =>
      sql`INSERT INTO inbox_channel_state (user_id, connection_id, channel, consumed, lwm_pos)
        VALUES (${userId}, ${connectionId}, ${channel}, ${n}, ${lwmPos})
        ON CONFLICT (user_id, connection_id, channel) DO UPDATE
          SET consumed = inbox_channel_state.consumed + excluded.consumed,
            lwm_pos = CASE WHEN ${advance} = 1 THEN excluded.lwm_pos ELSE inbox_channel_state.lwm_pos END`)
    /**
     * `consumeInChannel` for several channels in one statement (a page of the whole inbox spans many), fixed
     * per count of channels up to a page's worth. The rows go in channel order (two readers of one
     * connection on two daemons lock them in the same order).
     */
    const consumeInChannelsStatement = perCount(fixed, 5 * 64, (...flat) =>
      sql`INSERT INTO inbox_channel_state ${sql.insert(rowsOf(["user_id", "connection_id", "channel", "consumed", "lwm_pos"], flat))}
        ON CONFLICT (user_id, connection_id, channel) DO UPDATE
          SET consumed = inbox_channel_state.consumed + excluded.consumed`)
    const consumeInChannels = (userId: string, connectionId: string, counts: ReadonlyArray<readonly [string, number]>) => {
      if (counts.length === 0) return Effect.void
      if (counts.length === 1) return Effect.asVoid(consumeInChannel(userId, connectionId, counts[0][0], counts[0][1]))
      const flat = [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .flatMap(([channel, n]) => [userId, connectionId, channel, n, 0])
      return Effect.asVoid(consumeInChannelsStatement(...flat))
    }
    /** The same for the connection's totals: `n` more consumed, and the global scan mark when `advance` is 1. */
    const settleTotal = fixed((userId: string, connectionId: string, n: number, lwm: number, advance: number) =>
      sql`INSERT INTO inbox_state (user_id, connection_id, consumed, lwm) VALUES (${userId}, ${connectionId}, ${n}, ${lwm})
        ON CONFLICT (user_id, connection_id) DO UPDATE SET consumed = inbox_state.consumed + excluded.consumed,
          lwm = CASE WHEN ${advance} = 1 THEN excluded.lwm ELSE inbox_state.lwm END`)

    /**
     * Mark the returned posts read for this connection only, keeping the counters exact, and move the scan
     * mark the read may advance (`advance`: the channel's, or the global one) in the same upserts: each
     * state row is written once per read.
     */
    const markRead = (
      caller: Caller,
      rows: ReadonlyArray<DbPostRow>,
      now: string,
      advance: { readonly channel: string; readonly to: number } | { readonly channel?: undefined; readonly to: number } | undefined
    ) =>
      Effect.gen(function*() {
        const candidates = rows.filter((r) => r.connection_id !== caller.connectionId && r.is_read === 0)
        const perChannel = yield* consume(caller, candidates, now)
        let total = 0
        const channelMark = advance?.channel
        const counts: Array<readonly [string, number]> = []
        for (const [channel, { archived, n }] of perChannel) {
          if (channel === channelMark) {
            yield* settleChannel(caller.userId, caller.connectionId, channel, n, advance!.to, 1)
          } else {
            counts.push([channel, n])
          }
          if (!archived) total += n
        }
        yield* consumeInChannels(caller.userId, caller.connectionId, counts)
        if (channelMark !== undefined && !perChannel.has(channelMark)) {
          yield* settleChannel(caller.userId, caller.connectionId, channelMark, 0, advance!.to, 1)
        }
        const totalMark = advance !== undefined && advance.channel === undefined ? advance.to : undefined
        if (perChannel.size > 0 || totalMark !== undefined) {
          yield* settleTotal(caller.userId, caller.connectionId, total, totalMark ?? 0, totalMark !== undefined ? 1 : 0)
        }
      })

    /** The read marks of a page, one row of 5 per post: fixed per count of posts up to the largest page (200). */
    const insertReads = perCount<{ post_id: string }>(fixed, 5 * 200, (...flat) =>
      sql`INSERT INTO reads ${sql.insert(rowsOf(["user_id", "connection_id", "pos", "post_id", "read_at"], flat))}
        ON CONFLICT DO NOTHING RETURNING post_id`)

    /** Insert the read rows; per channel, how many visible posts this read really consumed and whether it is archived. */
    const consume = (caller: Caller, candidates: ReadonlyArray<DbPostRow>, now: string) =>
      Effect.gen(function*() {
        const perChannel = new Map<string, { n: number; archived: boolean }>()
        if (candidates.length === 0) return perChannel
        // Concurrent readers of one connection (two daemons): only the rows this insert really added are
        // counted (RETURNING skips those another transaction marked first), so `consumed` never counts a
        // read twice.
        const flat: Array<string | number> = []
        for (const r of candidates) flat.push(caller.userId, caller.connectionId, r.pos, r.id, now)
        const inserted = yield* insertReads(...flat)
        const added = new Set(inserted.map((r) => r.post_id))
        const fresh = candidates.filter((r) => added.has(r.id))
        // Archive state per channel as it stands now: the counter rows are share-locked first (Postgres;
        // in channel order, so readers never deadlock one another), so no closeout can archive or re-open
        // one of these channels before this transaction ends, and the state read after the lock is current.
        const channelsRead = [...new Set(fresh.filter((r) => r.kind !== "heartbeat").map((r) => r.channel))].sort()
        // (SQLite: the page's own reading is current, nothing can have moved under the write lock.)
        const archivedNow = new Map<string, boolean>()
        if (channelsRead.length > 0) {
          yield* sql.onDialectOrElse({
            pg: () =>
              Effect.gen(function*() {
                yield* sql`SELECT channel FROM channel_counters WHERE user_id = ${caller.userId}
                  AND ${sql.in("channel", channelsRead)} ORDER BY channel FOR SHARE`
                const states = yield* sql<{ id: string; archived_at: string | null }>`SELECT id, archived_at FROM channels
                  WHERE user_id = ${caller.userId} AND ${sql.in("id", channelsRead)}`
                for (const c of channelsRead) archivedNow.set(c, false)
                for (const st of states) archivedNow.set(st.id, st.archived_at !== null)
              }),
            orElse: () => Effect.void
          })
        }
        for (const r of fresh) {
          if (r.kind === "heartbeat") continue
          const c = perChannel.get(r.channel) ?? { n: 0, archived: archivedNow.get(r.channel) ?? r.archived === 1 }
          c.n++
          perChannel.set(r.channel, c)
        }
        return perChannel
      })

    /** A connection's scan mark in a channel and the user's last position, read together before a page. */
    const channelMarks = fixed((userId: string, connectionId: string, channel: string, sameUserId: string) =>
      sql`SELECT (SELECT lwm_pos FROM inbox_channel_state
          WHERE user_id = ${userId} AND connection_id = ${connectionId} AND channel = ${channel}) AS lwm,
        (SELECT last_pos FROM post_counters WHERE user_id = ${sameUserId}) AS last_pos`)
    /** The connection's global scan mark and the user's last position, read together before a page. */
    const totalMarks = fixed((userId: string, connectionId: string, sameUserId: string) =>
      sql`SELECT (SELECT lwm FROM inbox_state WHERE user_id = ${userId} AND connection_id = ${connectionId}) AS lwm,
        (SELECT last_pos FROM post_counters WHERE user_id = ${sameUserId}) AS last_pos`)
    const lastPosQuery = fixed((userId: string) => sql`SELECT last_pos AS n FROM post_counters WHERE user_id = ${userId}`)

    /**
     * The caller's channels, most recent first, with its unread in each (archived ones only when asked),
     * and on every row its global unread count (`unreadExpr`, read in the same snapshot: the inbox's
     * `unread_count` costs no statement of its own).
     */
    const channelsQuery = (
      connectionId: string,
      userId: string,
      archivedFilter: Statement.Fragment,
      unreadUser: string,
      unreadSameUser: string,
      unreadConnection: string
    ) =>
      sql`SELECT cc.channel, cc.last_seq, cc.visible - COALESCE(ics.consumed, 0) AS unread, cc.last_post_at,
          CASE WHEN ch.archived_at IS NULL THEN 0 ELSE 1 END AS archived,
          ${unreadExpr(unreadUser, unreadSameUser, unreadConnection)} AS total_unread
        FROM channel_counters cc
        LEFT JOIN inbox_channel_state ics
          ON ics.user_id = cc.user_id AND ics.connection_id = ${connectionId} AND ics.channel = cc.channel
        LEFT JOIN channels ch ON ch.user_id = cc.user_id AND ch.id = cc.channel
        WHERE cc.user_id = ${userId} ${archivedFilter}
        ORDER BY cc.last_post_at DESC, cc.channel
        ${limitTo(sql, MAX_CHANNELS_LISTED)}`
    const everyChannel = fixed((connectionId: string, userId: string, u: string, u2: string, c: string) =>
      channelsQuery(connectionId, userId, sql``, u, u2, c))
    /** (the named channel is listed even when archived) */
    const openChannels = fixed((
      connectionId: string,
      userId: string,
      named: string | null,
      u: string,
      u2: string,
      c: string
    ) => channelsQuery(connectionId, userId, sql`AND (ch.archived_at IS NULL OR cc.channel = ${named})`, u, u2, c))

    /** The channel list and the global unread count (from the list's rows; with no row listed, asked on its own). */
    const listChannels = (caller: Caller, input: InboxInput) =>
      (input.include_archived === true
        ? everyChannel(caller.connectionId, caller.userId, caller.userId, caller.userId, caller.connectionId)
        : openChannels(
          caller.connectionId,
          caller.userId,
          input.channel ?? null,
          caller.userId,
          caller.userId,
          caller.connectionId
        )).pipe(
          Effect.flatMap(decodeChannelRows),
          Effect.orDie,
          Effect.flatMap((rows) =>
            Effect.map(rows.length > 0 ? Effect.succeed(rows[0].total_unread) : unreadCount(caller), (unread) => ({
              unread,
              channels: rows.map((r): ChannelSummary => ({
                channel: r.channel,
                last_seq: r.last_seq,
                unread: r.unread,
                last_post_at: r.last_post_at,
                archived: r.archived === 1
              }))
            }))
          )
        )

    const readInbox = (caller: Caller, input: InboxInput) =>
      Effect.gen(function*() {
        const limit = input.limit ?? DEFAULT_INBOX_LIMIT
        if (limit > limits.inboxLimit) {
          return yield* new ValidationError({ detail: `limit: at most ${limits.inboxLimit}` })
        }
        let cursorPos = 0
        if (input.cursor !== undefined) {
          const m = CURSOR.exec(input.cursor)
          if (!m) return yield* new ValidationError({ detail: "cursor: not a cursor returned by this inbox" })
          cursorPos = Number(m[1])
        }
        // with a channel the default is the conversation (own and read posts too); without, the unread inbox
        const unreadOnly = input.unread_only ?? (input.channel === undefined)
        const conversation = input.channel !== undefined && !unreadOnly
        if (input.before_seq !== undefined && !conversation) {
          return yield* new ValidationError({ detail: "before_seq: only with channel (the conversation view)" })
        }
        const withHeartbeats = input.include_heartbeats === true
        const withArchived = input.include_archived === true
        const mark = input.peek !== true
        const channel = input.channel
        const kinds = input.kinds !== undefined && input.kinds.length > 0 ? [...new Set(input.kinds)] : undefined
        const userId = caller.userId
        const me = caller.connectionId

        // the low-water marks apply to unread-only views without heartbeats
        const useMarks = unreadOnly && !withHeartbeats
        const advanceMarks = mark && useMarks && kinds === undefined && input.cursor === undefined
        let lwm = 0
        let lwmPos = 0
        // The user's last position, read before the page (see the scan mark below): under concurrent writers
        // a post may commit between two statements, so "everything up to here was seen" must be a position
        // committed no later than the page's own snapshot (positions commit in order: the counter row's lock).
        // It is read with the mark, in one statement.
        let lastPosBefore = 0
        if (useMarks && channel !== undefined) {
          const [marks] = yield* channelMarks(userId, me, channel, userId).pipe(Effect.flatMap(decodeMarks))
          lwmPos = marks.lwm ?? 0
          lastPosBefore = marks.last_pos ?? 0
        } else if (useMarks && !withArchived) {
          const [marks] = yield* totalMarks(userId, me, userId).pipe(Effect.flatMap(decodeMarks))
          lwm = marks.lwm ?? 0
          lastPosBefore = marks.last_pos ?? 0
        } else if (advanceMarks) {
          lastPosBefore = (yield* lastPosQuery(userId).pipe(Effect.flatMap(decodeOptionalNumber)))[0]?.n ?? 0
        }

        const after = Math.max(cursorPos, lwm, lwmPos)
        // the conversation without a cursor is its newest `limit` posts (in seq order); a cursor pages forward
        const newest = conversation && input.cursor === undefined
        const filter: PageFilter = {
          userId,
          connectionId: me,
          after,
          channel,
          withArchived,
          kinds,
          withHeartbeats,
          unreadOnly,
          beforeSeq: input.before_seq
        }
        const rows = yield* decodePage(newest)(
          isPlainUnread(filter) ? unreadPage(limit)(me, userId, after, me) : postsPage(me, pageConditions(filter), limit, newest)
        )

        if (mark) {
          const now = yield* nowIso
          // advance the scan mark over a range this read has fully consumed (written with the read's counts)
          let advance: { readonly channel?: string; readonly to: number } | undefined
          if (advanceMarks) {
            // a short page saw everything there is up to the last position committed before it
            const top = rows.length < limit ? lastPosBefore : rows[rows.length - 1].pos
            if (channel !== undefined) {
              if (top > lwmPos) advance = { channel, to: top }
            } else if (!withArchived) {
              if (top > lwm) advance = { to: top }
            }
          }
          yield* markRead(caller, rows, now, advance)
        }

        const { channels, unread: unread_count } = yield* listChannels(caller, input)
        const last = rows[rows.length - 1]
        const result: InboxResult = {
          posts: yield* toPostRows(caller, rows),
          unread_count,
          channels,
          cursor: last !== undefined ? encodeCursor(last.pos) : (input.cursor ?? null)
        }
        return result
      })

    /**
     * Which committed events could give this read something to return: a post of the caller's user that
     * passes the read's filters. It over-approximates (a woken poll re-reads and parks again if empty).
     */
    const wouldReturn = (caller: Caller, input: InboxInput) => {
      const unreadOnly = input.unread_only ?? (input.channel === undefined)
      const kinds = input.kinds !== undefined && input.kinds.length > 0 ? new Set<string>(input.kinds) : undefined
      const heartbeats = input.include_heartbeats === true || (kinds?.has("heartbeat") ?? false)
      return (event: DomainEvent): boolean =>
        event._tag === "PostLanded" &&
        event.user_id === caller.userId &&
        (input.channel !== undefined ? event.channel === input.channel : input.include_archived === true || !event.archived) &&
        (kinds === undefined || kinds.has(event.kind)) &&
        (heartbeats || event.kind !== "heartbeat") &&
        (!unreadOnly || event.author !== caller.connectionId)
    }

    /**
     * Call `onUpdate` whenever a post lands that the caller would see as unread (in `channel`, or anywhere
     * not archived), until the scope closes: the `sophia://inbox[/<channel>]` resource subscription.
     */
    const watchUnread = (caller: Caller, channel: string | undefined, onUpdate: () => void) =>
      wakeups.watch(
        caller.userId,
        wouldReturn(caller, { ...(channel !== undefined ? { channel } : {}), unread_only: true }),
        onUpdate
      )

    const readOnce = (caller: Caller, input: InboxInput) =>
      input.peek === true ? readInbox(caller, input) : sql.withTransaction(readInbox(caller, input))

    /**
     * A long poll: park first (so no post can slip between the read and the wait), read, and with nothing
     * to return wait for a wake-up or the deadline, then read again. Ends early, never late; interrupted
     * (the client went away), its parking is released with the scope.
     */
    const longPoll = (caller: Caller, input: InboxInput, waitS: number) =>
      Effect.gen(function*() {
        const deadline = (yield* Clock.currentTimeMillis) + Math.round(waitS * 1000)
        const matches = wouldReturn(caller, input)
        while (true) {
          const done = yield* Effect.scoped(Effect.gen(function*() {
            const woken = yield* wakeups.park(caller.userId, matches)
            const result = yield* readOnce(caller, input)
            const now = yield* Clock.currentTimeMillis
            if (result.posts.length > 0 || now >= deadline) return Option.some(result)
            yield* Effect.timeoutOption(woken, Duration.millis(deadline - now))
            return Option.none<InboxResult>()
          }))
          if (Option.isSome(done)) return done.value
        }
      })

    /**
     * The caller's inbox. Reading marks exactly the returned posts read for this connection (unless
     * `peek`), in the same transaction that read them. With `wait_s`, an empty read waits for a post.
     */
    const inbox = spanned("Coordination.inbox", (caller: Caller, input: InboxInput) => {
      const waitS = input.wait_s ?? 0
      return (waitS > 0 ? longPoll(caller, input, waitS) : readOnce(caller, input)).pipe(
        Effect.catchTag("SqlError", "ParseError", Effect.die)
      )
    })

    // ---- what other services ask (they never read these tables themselves) ----

    /** How many posts the user has, as one SQL expression (for a caller's combined probe: `Orient`). */
    const postsCountExpr = (userId: string) =>
      sql`(SELECT COALESCE(MAX(last_pos), 0) FROM post_counters WHERE user_id = ${userId})`
    /** How many channels the user has, as one SQL expression. */
    const channelsCountExpr = (userId: string) => sql`(SELECT COUNT(*) FROM channel_counters WHERE user_id = ${userId})`

    const { shaped, named } = yield* makeStatements
    const decodeTotals = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ posts: DbInt, channels: DbInt })))
    const totalsOf = named("Coordination.totals", (p: { userId: string }) =>
      sql`SELECT (SELECT COALESCE(MAX(last_pos), 0) FROM post_counters WHERE user_id = ${p.userId}) AS posts,
        (SELECT COUNT(*) FROM channel_counters WHERE user_id = ${p.userId}) AS channels`)
    /** How many posts and channels the user has (for `orient`), in one statement. */
    const totals = spanned("Coordination.totals", (userId: string): Effect.Effect<{ readonly posts: number; readonly channels: number }> =>
      totalsOf({ userId }).pipe(
        Effect.flatMap(decodeTotals),
        Effect.map(([{ channels, posts }]) => ({ posts, channels })),
        Effect.catchTag("SqlError", "ParseError", Effect.die)
      ))

    const decodeConsumed = Schema.decodeUnknown(Schema.NonEmptyArray(Schema.Struct({
      visible: DbInt,
      connection_id: Schema.NullOr(Schema.String),
      consumed: Schema.NullOr(DbInt)
    })))
    // the user's visible count on one row, left-joined to the listed connections' consumed counts: at least
    // one row even when no listed connection has read or posted anything yet
    const consumedOf = shaped("Coordination.unreadOf", 1000, (p: { userId: string; ids: ReadonlyArray<string> }) =>
      sql`SELECT pc.visible, s.connection_id, s.consumed
        FROM (SELECT COALESCE((SELECT visible FROM post_counters WHERE user_id = ${p.userId}), 0) AS visible) pc
        LEFT JOIN inbox_state s ON s.user_id = ${p.userId} AND ${sql.in("s.connection_id", p.ids)}`)
    /**
     * Every listed connection's global unread count (as `unreadCount`: the user's visible posts minus those
     * the connection consumed) in one statement: the portal's fleet view, instead of one count per connection.
     */
    const unreadOf = spanned(
      "Coordination.unreadOf",
      (userId: string, connectionIds: ReadonlyArray<string>): Effect.Effect<ReadonlyMap<string, number>> =>
        connectionIds.length === 0
          ? Effect.succeed(new Map())
          : consumedOf({ userId, ids: [...new Set(connectionIds)] }).pipe(
            Effect.flatMap(decodeConsumed),
            Effect.map((rows) => {
              const visible = rows[0].visible
              const consumed = new Map<string, number>()
              for (const r of rows) if (r.connection_id !== null) consumed.set(r.connection_id, r.consumed ?? 0)
              return new Map(connectionIds.map((id) => [id, visible - (consumed.get(id) ?? 0)]))
            }),
            Effect.catchTag("SqlError", "ParseError", Effect.die)
          )
    )

    const lastSeqRow = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, channel: Schema.String }),
      Result: Schema.Struct({ last_seq: DbInt }),
      execute: ({ channel, userId }) =>
        sql`SELECT last_seq FROM channel_counters WHERE user_id = ${userId} AND channel = ${channel}`
    })
    /** The channel's last `channel_seq` (0 for a channel nothing was posted to). */
    const lastSeq = (userId: string, channel: string) =>
      Effect.orDie(Effect.map(lastSeqRow({ userId, channel }), Option.match({ onNone: () => 0, onSome: (r) => r.last_seq })))

    const firstPostRow = SqlSchema.findAll({
      Request: Schema.Struct({
        userId: Schema.String,
        channel: Schema.String,
        afterSeq: Schema.Number,
        atSeq: Schema.NullOr(Schema.Number),
        from: Schema.NullOr(Schema.String),
        kind: Schema.NullOr(Schema.String),
        except: Schema.String
      }),
      Result: PostRef,
      execute: (q) =>
        sql`SELECT id, user_id, connection_id, kind, channel, channel_seq FROM posts
          WHERE user_id = ${q.userId} AND channel = ${q.channel} AND channel_seq > ${q.afterSeq} AND id <> ${q.except}
            ${q.atSeq === null ? sql`` : sql`AND channel_seq = ${q.atSeq}`}
            ${q.from === null ? sql`` : sql`AND connection_id = ${q.from}`}
            ${q.kind === null ? sql`` : sql`AND kind = ${q.kind}`}
          ORDER BY channel_seq LIMIT 1`
    })
    /**
     * The first post of a channel after `afterSeq` (or exactly at `atSeq`), optionally by one author and
     * of one kind, other than `except`: how a wait reads whether its predicate already holds.
     */
    const firstPost = (query: {
      readonly userId: string
      readonly channel: string
      readonly afterSeq?: number
      readonly atSeq?: number
      readonly from?: string
      readonly kind?: string
      readonly except?: string
    }): Effect.Effect<Option.Option<PostRef>> =>
      firstPostRow({
        userId: query.userId,
        channel: query.channel,
        afterSeq: query.afterSeq ?? 0,
        atSeq: query.atSeq ?? null,
        from: query.from ?? null,
        kind: query.kind ?? null,
        except: query.except ?? ""
      }).pipe(Effect.map((rows) => Option.fromNullable(rows[0])), Effect.orDie)

    const postsById = SqlSchema.findAll({
      Request: Schema.Array(Schema.String),
      Result: PostRef,
      execute: (ids) => sql`SELECT id, user_id, connection_id, kind, channel, channel_seq FROM posts WHERE ${sql.in("id", ids)}`
    })
    /** Which of these ids are posts of the user (a claim's source that is a post is refused). */
    const postIdsOf = (userId: string, ids: ReadonlyArray<string>): Effect.Effect<ReadonlySet<string>> =>
      ids.length === 0
        ? Effect.succeed(new Set())
        : postsById(ids).pipe(
          Effect.map((rows) => new Set(rows.filter((r) => r.user_id === userId).map((r) => r.id))),
          Effect.orDie
        )

    const { searchPosts, indexPosts, postsIndexedInBatches } = yield* makePostSearch
    return { post, beacon, inbox, wouldReturn, watchUnread, searchPosts, indexPosts, postsIndexedInBatches, unreadCount, unreadOf, totals, unreadExpr, postsCountExpr, channelsCountExpr, lastSeq, firstPost, postIdsOf, holdChannel } as const
  })
}) {}

export type { PostKind }
