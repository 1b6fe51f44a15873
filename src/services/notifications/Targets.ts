import { Clock, Effect, ParseResult, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { NotFound, ValidationError } from "../../domain/Errors.js"
import type { NotificationInfo, SentEvent, TargetInfo } from "../../domain/Notifications.js"
import { AddTargetInput } from "../../domain/Notifications.js"
import type { Auth } from "../Auth.js"
import { describe, namedIn, type StoredData } from "./Content.js"
import type { ListedRow, NotifyStore, TargetRow } from "./Store.js"

const decodeAdd = Schema.decodeUnknown(AddTargetInput, { onExcessProperty: "error" })
const iso = (ms: number) => new Date(ms).toISOString()

export const targetInfo = (t: TargetRow): TargetInfo => ({
  id: t.id,
  url: t.url,
  events: t.events,
  format: t.format,
  signed: t.secret !== null,
  created_at: t.created_at
})

const notificationInfo = (r: ListedRow, names: ReadonlyMap<string, string>): NotificationInfo => ({
  id: r.id,
  target_id: r.target_id,
  event: r.event as SentEvent,
  summary: describe(r.event as SentEvent, JSON.parse(r.content) as StoredData, names).summary,
  status: r.status,
  attempts: Number(r.attempts),
  created_at: r.created_at,
  last_error: r.last_error,
  delivered_at: r.delivered_at
})

/**
 * The owner's targets (`sophia notify add|list|remove`, the portal's Notifications page) and the owner's hand on
 * the outbox: the notifications listed, a dead one sent again (`Retry`: its attempts start over).
 */
export const makeTargets = (store: NotifyStore, auth: Effect.Effect.Success<typeof Auth>) => {
  /** Rows as listed, their agents named as they are now (one statement for every row's names). */
  const infos = (rows: ReadonlyArray<ListedRow>) =>
    Effect.map(auth.names(rows.flatMap((r) => namedIn(JSON.parse(r.content) as StoredData))), (names) => rows.map((r) => notificationInfo(r, names)))

  const add = (userId: string, input: unknown) =>
    Effect.gen(function*() {
      const decoded = yield* decodeAdd(input).pipe(Effect.mapError((e) => new ValidationError({ detail: ParseResult.TreeFormatter.formatErrorSync(e) })))
      const events = [...new Set(decoded.events)]
      const row: TargetRow = {
        id: randomUUID(),
        user_id: userId,
        url: decoded.url,
        events,
        format: decoded.format,
        secret: decoded.secret ?? null,
        created_at: iso(yield* Clock.currentTimeMillis)
      }
      yield* store.insertTarget({ ...row, userId, events: events.join(","), at: row.created_at })
      return targetInfo(row)
    })

  const list = (userId: string) => Effect.map(store.targetsOf(userId), (rows) => rows.map(targetInfo))

  /** The user's target `id`, or `not_found`. */
  const find = (userId: string, id: string) =>
    Effect.flatMap(store.targetById(id), (t) =>
      t === undefined || t.user_id !== userId ? Effect.fail(new NotFound({ what: "notification target", id })) : Effect.succeed(t))

  /** Remove a target and its notifications (sent or not): nothing more is sent to it. */
  const remove = (userId: string, id: string) =>
    Effect.gen(function*() {
      const target = yield* find(userId, id)
      yield* store.deleteTarget({ id, userId })
      yield* store.deleteOutboxOf({ targetId: id })
      return targetInfo(target)
    })

  const notifications = (userId: string) =>
    Effect.gen(function*() {
      const recent = yield* infos(yield* store.recentOf(userId))
      const dead = yield* infos(yield* store.deadOf(userId))
      return { recent, dead } as const
    })

  /** A dead notification of the user's, pending again from now with its attempts counted anew. */
  const retry = (userId: string, id: string) =>
    Effect.gen(function*() {
      const now = iso(yield* Clock.currentTimeMillis)
      const revived = yield* store.retryDead({ id, userId, now })
      if (revived.length === 0) return yield* new NotFound({ what: "dead notification", id })
      return (yield* infos([(yield* store.rowById(id))!]))[0]
    })

  return { add, list, find, remove, notifications, retry } as const
}
