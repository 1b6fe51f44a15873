import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { NotifyEvent, NotifyFormat } from "../../domain/Notifications.js"
import { DbInt } from "../../domain/Time.js"
import { skipLocked } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"

/** Rows claimed by one look of a worker (the rest wait for its next look, or another daemon's). */
export const CLAIM_BATCH = 16
/** The notifications a listing shows (newest first). */
const LISTED = 50

const Events = Schema.transform(Schema.String, Schema.Array(NotifyEvent), {
  strict: false,
  decode: (s) => s.split(",").filter((e) => e !== ""),
  encode: (events) => events.join(",")
})

export const TargetRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  url: Schema.String,
  events: Events,
  format: NotifyFormat,
  secret: Schema.NullOr(Schema.String),
  created_at: Schema.String
})
export type TargetRow = typeof TargetRow.Type

/** What the subscriber needs of a user's targets: which hears what. */
const Subscribed = Schema.Struct({ id: Schema.String, events: Events })

export const ClaimedRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  target_id: Schema.String,
  event: Schema.String,
  content: Schema.String,
  created_at: Schema.String,
  attempts: DbInt
})
export type ClaimedRow = typeof ClaimedRow.Type

export const ListedRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  target_id: Schema.String,
  event: Schema.String,
  content: Schema.String,
  status: Schema.Literal("pending", "delivered", "dead"),
  attempts: DbInt,
  created_at: Schema.String,
  last_error: Schema.NullOr(Schema.String),
  delivered_at: Schema.NullOr(Schema.String)
})
export type ListedRow = typeof ListedRow.Type

const decodeTargets = Schema.decodeUnknown(Schema.Array(TargetRow))
const decodeSubscribed = Schema.decodeUnknown(Schema.Array(Subscribed))
const decodeClaimed = Schema.decodeUnknown(Schema.Array(ClaimedRow))
const decodeListed = Schema.decodeUnknown(Schema.Array(ListedRow))
const decodeNext = Schema.decodeUnknown(Schema.Array(Schema.Struct({ next_at: Schema.NullOr(Schema.String) })))

/**
 * Every statement on the notifications' tables (`notify_targets`, `notify_outbox`), named. A claim is one
 * conditional update over the due rows no other transaction holds (`skipLocked`: Postgres' `FOR UPDATE SKIP
 * LOCKED`), which moves each row's `next_at` past the send's timeout and counts the attempt; an outcome is
 * written only by the claim it answers (`attempts` is the claim's token), so a late answer to a claim that
 * expired and was taken again changes nothing.
 */
export const makeNotifyStore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements
  const targetColumns = sql.literal("id, user_id, url, events, format, secret, created_at")
  const listedColumns = sql.literal("id, user_id, target_id, event, content, status, attempts, created_at, last_error, delivered_at")

  const subscribedOf = named("Notify.subscribed", (p: { userId: string }) =>
    sql`SELECT id, events FROM notify_targets WHERE user_id = ${p.userId}`)
  const targetsOf = named("Notify.targets", (p: { userId: string }) =>
    sql`SELECT ${targetColumns} FROM notify_targets WHERE user_id = ${p.userId} ORDER BY created_at, id`)
  const targetById = named("Notify.target", (p: { id: string }) => sql`SELECT ${targetColumns} FROM notify_targets WHERE id = ${p.id}`)
  const insertTarget = named("Notify.addTarget", (p: {
    id: string
    userId: string
    url: string
    events: string
    format: string
    secret: string | null
    at: string
  }) =>
    sql`INSERT INTO notify_targets (id, user_id, url, events, format, secret, created_at)
      VALUES (${p.id}, ${p.userId}, ${p.url}, ${p.events}, ${p.format}, ${p.secret}, ${p.at})`)
  const deleteTarget = named("Notify.removeTarget", (p: { id: string; userId: string }) =>
    sql`DELETE FROM notify_targets WHERE id = ${p.id} AND user_id = ${p.userId} RETURNING id`)
  const deleteOutboxOf = named("Notify.removeOutbox", (p: { targetId: string }) =>
    sql`DELETE FROM notify_outbox WHERE target_id = ${p.targetId}`)
  const insertRow = named("Notify.enqueue", (p: { id: string; userId: string; targetId: string; event: string; content: string; at: string }) =>
    sql`INSERT INTO notify_outbox (id, user_id, target_id, event, content, created_at, status, attempts, next_at)
      VALUES (${p.id}, ${p.userId}, ${p.targetId}, ${p.event}, ${p.content}, ${p.at}, 'pending', 0, ${p.at})`)
  const claim = named("Notify.claim", (p: { now: string; until: string; me: string }) =>
    sql`UPDATE notify_outbox SET next_at = ${p.until}, claimed_by = ${p.me}, attempts = attempts + 1
      WHERE id IN (SELECT id FROM notify_outbox WHERE status = 'pending' AND next_at <= ${p.now}
        ORDER BY next_at LIMIT ${sql.literal(String(CLAIM_BATCH))} ${skipLocked(sql)})
      RETURNING id, user_id, target_id, event, content, created_at, attempts`)
  const delivered = named("Notify.delivered", (p: { id: string; at: string }) =>
    sql`UPDATE notify_outbox SET status = 'delivered', delivered_at = ${p.at}, last_error = NULL
      WHERE id = ${p.id} AND status = 'pending'`)
  const failed = named("Notify.failed", (p: { id: string; attempts: number; next: string; error: string; status: string }) =>
    sql`UPDATE notify_outbox SET status = ${p.status}, next_at = ${p.next}, last_error = ${p.error}
      WHERE id = ${p.id} AND attempts = ${p.attempts} AND status = 'pending'`)
  const retryDead = named("Notify.retry", (p: { id: string; userId: string; now: string }) =>
    sql`UPDATE notify_outbox SET status = 'pending', attempts = 0, next_at = ${p.now}, last_error = NULL
      WHERE id = ${p.id} AND user_id = ${p.userId} AND status = 'dead' RETURNING id`)
  const nextDue = named("Notify.nextDue", () => sql`SELECT MIN(next_at) AS next_at FROM notify_outbox WHERE status = 'pending'`)
  // (a user's rows through their targets: `notify_outbox_target` serves the owner's listing)
  const recentOf = named("Notify.recent", (p: { userId: string }) =>
    sql`SELECT ${listedColumns} FROM notify_outbox WHERE target_id IN (SELECT id FROM notify_targets WHERE user_id = ${p.userId})
      ORDER BY created_at DESC, id LIMIT ${sql.literal(String(LISTED))}`)
  const deadOf = named("Notify.dead", (p: { userId: string }) =>
    sql`SELECT ${listedColumns} FROM notify_outbox WHERE target_id IN (SELECT id FROM notify_targets WHERE user_id = ${p.userId})
      AND status = 'dead' ORDER BY created_at DESC, id LIMIT ${sql.literal(String(LISTED))}`)
  const rowById = named("Notify.row", (p: { id: string }) => sql`SELECT ${listedColumns} FROM notify_outbox WHERE id = ${p.id}`)

  return {
    sql,
    subscribedOf: (userId: string) => Effect.flatMap(subscribedOf({ userId }), decodeSubscribed),
    targetsOf: (userId: string) => Effect.flatMap(targetsOf({ userId }), decodeTargets),
    targetById: (id: string) => Effect.map(Effect.flatMap(targetById({ id }), decodeTargets), (rows) => rows[0]),
    insertTarget,
    deleteTarget,
    deleteOutboxOf,
    insertRow,
    claim: (p: { now: string; until: string; me: string }) => Effect.flatMap(claim(p), decodeClaimed),
    delivered,
    failed,
    retryDead,
    nextDue: Effect.map(Effect.flatMap(nextDue({}), decodeNext), (rows) => rows[0]?.next_at ?? null),
    recentOf: (userId: string) => Effect.flatMap(recentOf({ userId }), decodeListed),
    deadOf: (userId: string) => Effect.flatMap(deadOf({ userId }), decodeListed),
    rowById: (id: string) => Effect.map(Effect.flatMap(rowById({ id }), decodeListed), (rows) => rows[0])
  } as const
})

/** What the notifications' modules share of its store. */
export type NotifyStore = Effect.Effect.Success<typeof makeNotifyStore>
