import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { InboxInput, InboxResult } from "../../domain/Coordination.js"
import { Unauthenticated, ValidationError } from "../../domain/Errors.js"
import type { DomainEvent } from "../../domain/Events.js"
import { nowIso } from "../../domain/Time.js"
import { Auth } from "../Auth.js"
import { spanned } from "../Spans.js"
import type { PollSpec } from "../Wakeups.js"
import { Wakeups } from "../Wakeups.js"
import type { makeInboxPages, PageFilter } from "./InboxPages.js"
import type { makeReadMarks, ScanAdvance } from "./ReadMarks.js"
import { toPostRows as postRowsNamed } from "./Rows.js"
import type { makeUnread } from "./Unread.js"

/**
 * The per-connection inbox: a page (the unread view by default, a channel's conversation, filtered
 * views), the read marks it writes in the same transaction, the channel list and unread count it returns,
 * the long poll (`wait_s`) and the resource subscription (`watchUnread`). The cursor is a post position.
 */

const CURSOR = /^p(\d{1,15})$/
const encodeCursor = (pos: number) => `p${pos}`
const DEFAULT_INBOX_LIMIT = 50

export interface InboxParts {
  /** The largest page a read may ask for (`SOPHIA_INBOX_LIMIT_MAX`). */
  readonly inboxLimit: number
  readonly pages: Effect.Effect.Success<typeof makeInboxPages>
  readonly readMarks: Effect.Effect.Success<typeof makeReadMarks>
  readonly unread: Effect.Effect.Success<typeof makeUnread>
}

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
    (input.to_me !== true || event.to_connection_id === caller.connectionId) &&
    (!unreadOnly || event.author !== caller.connectionId)
}

/**
 * The long polls that read the same thing: a connection's polls with the same arguments (`wait_s` aside; the
 * projection is applied after the read) form one group in Wakeups.
 */
const pollKey = (input: InboxInput) => {
  const { wait_s: _wait, ...read } = input
  const kinds = read.kinds === undefined ? undefined : [...new Set(read.kinds)].sort()
  const entries = Object.entries({ ...read, kinds }).filter(([, v]) => v !== undefined)
  return `inbox:${JSON.stringify(entries.sort(([a], [b]) => (a < b ? -1 : 1)))}`
}

/**
 * A long poll as Wakeups parks it: read, and with nothing to return wait for a post it would return or the
 * deadline. The connection's polls with the same arguments share each wake-up: an unread read that marks what
 * it returns consumes it for all of them (the others read again only if it returned a full page); any other
 * read (a peek, the conversation) is what each of them returns. Ends early, never late; `Unauthenticated` once
 * the connection is revoked.
 */
const longPollOf = <E>(caller: Caller, input: InboxInput, deadline: number, read: Effect.Effect<InboxResult, E>): PollSpec<InboxResult, E> => {
  const unreadOnly = input.unread_only ?? (input.channel === undefined)
  const limit = input.limit ?? DEFAULT_INBOX_LIMIT
  return {
    owner: caller,
    key: pollKey(input),
    matches: wouldReturn(caller, input),
    sharing: unreadOnly && input.peek !== true ? "consumed" : "shared",
    deadline,
    read,
    found: (result) => result.posts.length > 0,
    more: (result) => result.posts.length >= limit
  }
}

export const makeInbox = ({ inboxLimit, pages, readMarks, unread }: InboxParts) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const wakeups = yield* Wakeups

    const toPostRows = postRowsNamed(auth.names)

    /**
     * A long poll's read ends `Unauthenticated` once its connection is revoked, checked after the page was read
     * (in its transaction): a page holding a post committed after the revocation is never returned, and what
     * the read marked is rolled back. One lookup by primary key.
     */
    const stillLive = (caller: Caller) =>
      Effect.flatMap(auth.get(caller.connectionId), (info) =>
        Option.exists(info, (c) => c.revoked_at === null) ? Effect.void : Effect.fail(new Unauthenticated()))

    const readInbox = (caller: Caller, input: InboxInput, live: boolean) =>
      Effect.gen(function*() {
        const limit = input.limit ?? DEFAULT_INBOX_LIMIT
        if (limit > inboxLimit) {
          return yield* new ValidationError({ detail: `limit: at most ${inboxLimit}` })
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
        const toMe = input.to_me === true

        const useMarks = unreadOnly && !withHeartbeats
        // a filtered read (kinds, to_me) marks what it returned, and no scan mark: what it skipped stays unread
        const advanceMarks = mark && useMarks && kinds === undefined && !toMe && input.cursor === undefined
        const { lastPosBefore, lwm, lwmPos } = yield* pages.startOf(caller, { useMarks, advanceMarks, channel, withArchived })

        const after = Math.max(cursorPos, lwm, lwmPos)
        // the conversation without a cursor is its newest `limit` posts (in seq order); a cursor pages forward
        const newest = conversation && input.cursor === undefined
        const filter: PageFilter = {
          userId: caller.userId,
          connectionId: caller.connectionId,
          after,
          channel,
          withArchived,
          kinds,
          withHeartbeats,
          unreadOnly,
          toMe,
          beforeSeq: input.before_seq
        }
        const rows = yield* pages.page(filter, limit, newest)
        if (live) yield* stillLive(caller)

        if (mark) {
          const now = yield* nowIso
          // advance the scan mark over a range this read has fully consumed (written with the read's counts)
          let advance: ScanAdvance | undefined
          if (advanceMarks) {
            // a short page saw everything there is up to the last position committed before it
            const top = rows.length < limit ? lastPosBefore : rows[rows.length - 1].pos
            if (channel !== undefined) {
              if (top > lwmPos) advance = { channel, to: top }
            } else if (!withArchived) {
              if (top > lwm) advance = { to: top }
            }
          }
          yield* readMarks.markRead(caller, rows, now, advance)
        }

        const { channels, unread: unread_count } = yield* unread.listChannels(caller, input)
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
     * Call `onUpdate` whenever a post lands that the caller would see as unread (in `channel`, or anywhere
     * not archived), until the scope closes: the `sophia://inbox[/<channel>]` resource subscription.
     */
    const watchUnread = spanned("Coordination.watchUnread", (caller: Caller, channel: string | undefined, onUpdate: () => void) =>
      wakeups.watch(
        caller,
        wouldReturn(caller, { ...(channel !== undefined ? { channel } : {}), unread_only: true }),
        onUpdate
      ))

    const readOnce = (caller: Caller, input: InboxInput, live = false) =>
      input.peek === true ? readInbox(caller, input, live) : sql.withTransaction(readInbox(caller, input, live))

    /** A long poll (see `longPollOf`), counted against the connection's cap on parked long polls. */
    const longPoll = (caller: Caller, input: InboxInput, waitS: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        wakeups.poll("inbox", longPollOf(caller, input, now + Math.round(waitS * 1000), readOnce(caller, input, true))))

    /**
     * The caller's inbox. Reading marks exactly the returned posts read for this connection (unless
     * `peek`), in the same transaction that read them — with `to_me`, only the posts addressed to it that
     * it returned. With `wait_s`, an empty read waits for a post.
     */
    const inbox = spanned("Coordination.inbox", (caller: Caller, input: InboxInput) => {
      const waitS = input.wait_s ?? 0
      return (waitS > 0 ? longPoll(caller, input, waitS) : readOnce(caller, input)).pipe(
        Effect.catchTag("SqlError", "ParseError", Effect.die)
      )
    })

    return { inbox, wouldReturn, watchUnread } as const
  })
