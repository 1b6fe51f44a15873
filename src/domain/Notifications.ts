import { Schema } from "effect"

/**
 * Notifications (docs/architecture.md, "Notifications"): the owner reached where they are — a webhook into
 * chat, a phone push — from a durable outbox written in the transaction of the event it reports.
 */

/** What a target may subscribe to. */
export const NOTIFY_EVENTS = ["approval_requested", "approval_decided", "wait_ended", "orphan", "connection_revoked"] as const
export const NotifyEvent = Schema.Literal(...NOTIFY_EVENTS)
export type NotifyEvent = typeof NotifyEvent.Type

/** What a notification's `Sophia-Event` says: a subscribed event, or `test` (`sophia notify test`). */
export type SentEvent = NotifyEvent | "test"

/** How a target's body is written: the contract's JSON, Slack's `{ text }`, ntfy's plain text with its headers. */
export const NOTIFY_FORMATS = ["json", "slack", "ntfy"] as const
export const NotifyFormat = Schema.Literal(...NOTIFY_FORMATS)
export type NotifyFormat = typeof NotifyFormat.Type

/** A POST that has not answered 2xx within this long failed (and is retried). */
export const SEND_TIMEOUT_MS = 10_000
/** Attempts before a notification is dead (listed in the portal with `Retry`). */
export const MAX_ATTEMPTS = 8
/** The first retry waits this long; each next one twice as long, ±20 % jitter. */
export const FIRST_BACKOFF_MS = 1000
export const JITTER = 0.2
/** An approve link (a one-time login limited to its approval) is valid this long, and once. */
export const APPROVE_LINK_TTL_MS = 15 * 60_000

/**
 * The wait before attempt `attempts + 1`, after `attempts` failed (`first` ms, 1 s unless configured, doubling),
 * scaled by `jitter` in [-1, 1].
 */
export const backoffMs = (attempts: number, jitter: number, first = FIRST_BACKOFF_MS) =>
  Math.round(first * 2 ** Math.max(0, attempts - 1) * (1 + JITTER * Math.max(-1, Math.min(1, jitter))))

export const TargetUrl = Schema.String.pipe(
  Schema.maxLength(2048),
  Schema.filter((u) => {
    try {
      const url = new URL(u)
      return (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "" ? undefined : "an http:// or https:// URL"
    } catch {
      return "an http:// or https:// URL"
    }
  })
)

/** `sophia notify add` / the portal's add form, decoded. */
export const AddTargetInput = Schema.Struct({
  url: TargetUrl,
  events: Schema.NonEmptyArray(NotifyEvent).pipe(Schema.maxItems(NOTIFY_EVENTS.length)),
  format: Schema.optionalWith(NotifyFormat, { default: () => "json" as const }),
  secret: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256)))
})
export type AddTargetInput = Schema.Schema.Encoded<typeof AddTargetInput>

/** A target as listed (its secret never shown: only whether it has one). */
export interface TargetInfo {
  readonly id: string
  readonly url: string
  readonly events: ReadonlyArray<NotifyEvent>
  readonly format: NotifyFormat
  readonly signed: boolean
  readonly created_at: string
}

/** A notification as the portal and `notify list` show it. */
export interface NotificationInfo {
  readonly id: string
  readonly target_id: string
  readonly event: SentEvent
  readonly summary: string
  readonly status: "pending" | "delivered" | "dead"
  readonly attempts: number
  readonly created_at: string
  readonly last_error: string | null
  readonly delivered_at: string | null
}

/**
 * What an outbox row holds of its notification: written once, with the event. `links` are paths on the
 * portal (`/portal/…`); the worker makes them absolute with the daemon's public base URL when it sends.
 */
export interface NotificationContent {
  readonly summary: string
  readonly data: Readonly<Record<string, unknown>>
  readonly links: Readonly<Record<string, string>>
}

/** The contract's body (format `json`): `{ id, event, at, summary, data, links }`. */
export interface NotificationBody extends NotificationContent {
  readonly id: string
  readonly event: SentEvent
  readonly at: string
}
