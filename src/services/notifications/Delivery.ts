import { Clock, Effect, Either, Random } from "effect"
import type { NotificationBody, NotificationContent, SentEvent } from "../../domain/Notifications.js"
import { backoffMs, MAX_ATTEMPTS } from "../../domain/Notifications.js"
import type { Auth } from "../Auth.js"
import type { Portal } from "../Portal.js"
import { describe, namedIn, type StoredData } from "./Content.js"
import { headersOf, render } from "./Formats.js"
import type { ClaimedRow, NotifyStore } from "./Store.js"
import { CLAIM_BATCH } from "./Store.js"

/** Sends of one look at once (the rest of a batch waits for a free one). */
const SENDS_AT_ONCE = 8
/** A claim outlives the send's timeout by this much before the row is due again (a worker that died). */
const CLAIM_MARGIN_MS = 5000
/** The most of an error kept on a row. */
const ERROR_MAX = 300

const iso = (ms: number) => new Date(ms).toISOString()

/** A path of the portal made absolute on the daemon's public base URL. */
const absolute = (links: Readonly<Record<string, string>>, baseUrl: string) => {
  const base = baseUrl.replace(/\/+$/, "")
  return Object.fromEntries(Object.entries(links).map(([name, path]) => [name, base + path]))
}

/** The body a row is sent as: its content with the portal's links made absolute. */
const bodyOf = (row: ClaimedRow, content: NotificationContent, baseUrl: string): NotificationBody => ({
  id: row.id,
  event: row.event as SentEvent,
  at: row.created_at,
  summary: content.summary,
  data: content.data,
  links: absolute(content.links, baseUrl)
})

/**
 * One POST: its HTTP status, or why there was none. No answer within `timeoutMs` is a failure (the request is
 * aborted); a redirect is not followed (it is not a 2xx).
 */
const post = (url: string, body: string, headers: Record<string, string>, timeoutMs: number): Effect.Effect<Either.Either<number, string>> =>
  Effect.tryPromise({
    try: async (signal) => {
      const response = await fetch(url, { method: "POST", body, headers, signal, redirect: "manual" })
      await response.body?.cancel().catch(() => undefined)
      return response.status
    },
    catch: (e) => (e instanceof Error ? (e.cause instanceof Error ? `${e.message}: ${e.cause.message}` : e.message) : String(e))
  }).pipe(
    Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => `no answer in ${Math.round(timeoutMs / 1000)} s` }),
    Effect.either
  )

/**
 * The outbox's sending side (one look of a worker: `deliverDue`): claim the due rows (a batch at a time, each
 * claim moving the row's `next_at` past the send's timeout), POST each to its target as its format says, and
 * record the outcome — a 2xx delivers it; anything else waits 1 s doubling (±20 % jitter, Effect's `Random`)
 * until the 8th attempt failed, then it is dead. Times through `Clock`, so a TestClock drives the schedule.
 */
export interface DeliveryDeps {
  readonly store: NotifyStore
  readonly auth: Effect.Effect.Success<typeof Auth>
  readonly portal: Effect.Effect.Success<typeof Portal>
  /** this process's instance id (who claimed a row), made when first asked (services/Daemons.ts) */
  readonly me: () => string
  readonly timeoutMs: number
  readonly firstBackoffMs: number
}

export const makeDelivery = ({ store, auth, portal, me, timeoutMs, firstBackoffMs }: DeliveryDeps) => {
  const claimMs = timeoutMs + CLAIM_MARGIN_MS

  /**
   * What a row says now: its facts with the agents' names, and for `approval_requested` an approve link minted
   * for this send (a one-time login limited to the approval, valid 15 minutes from now: a retry carries a fresh
   * one, so the link a receiver gets is never stale).
   */
  const contentOf = (row: ClaimedRow) =>
    Effect.gen(function*() {
      const data = JSON.parse(row.content) as StoredData
      const names = yield* auth.names(namedIn(data))
      if (row.event !== "approval_requested" || typeof data.approval_id !== "string") return describe(row.event as SentEvent, data, names)
      const link = yield* portal.mintApproveLink(row.user_id, data.approval_id)
      return describe("approval_requested", data, names, `/portal/approve/${encodeURIComponent(data.approval_id)}?token=${link.token}`)
    })

  const record = (row: ClaimedRow, outcome: Either.Either<number, string>) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (Either.isRight(outcome) && outcome.right >= 200 && outcome.right < 300) {
        yield* store.delivered({ id: row.id, at: iso(now) })
        return true
      }
      const error = (Either.isRight(outcome) ? `HTTP ${outcome.right}` : outcome.left).slice(0, ERROR_MAX)
      const dead = row.attempts >= MAX_ATTEMPTS
      const jitter = (yield* Random.next) * 2 - 1
      const next = dead ? now : now + backoffMs(row.attempts, jitter, firstBackoffMs)
      yield* store.failed({ id: row.id, attempts: row.attempts, next: iso(next), error, status: dead ? "dead" : "pending" })
      return false
    })

  const deliverOne = (row: ClaimedRow, baseUrl: string) =>
    Effect.gen(function*() {
      const target = yield* store.targetById(row.target_id)
      // removed since the claim: its rows went with it
      if (target === undefined) return false
      const body = bodyOf(row, yield* contentOf(row), baseUrl)
      const rendered = render(target.format, body)
      const unixS = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const outcome = yield* post(target.url, rendered.body, headersOf(rendered, body, target.secret, unixS), timeoutMs)
      return yield* record(row, outcome)
    })

  /** Claim up to a batch of the rows due now (each then belongs to this claim until its send's timeout has passed). */
  const claimDue = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    return yield* store.sql.withTransaction(store.claim({ now: iso(now), until: iso(now + claimMs), me: me() }))
  })

  /** Claim what is due now and send it, a batch at a time, until nothing due is left; returns how many were delivered. */
  const deliverDue = (baseUrl: string) =>
    Effect.gen(function*() {
      let delivered = 0
      while (true) {
        const claimed = yield* claimDue
        const sent = yield* Effect.forEach(claimed, (row) => deliverOne(row, baseUrl), { concurrency: SENDS_AT_ONCE })
        delivered += sent.filter((ok) => ok).length
        if (claimed.length < CLAIM_BATCH) return delivered
      }
    })

  return { claimDue, deliverOne, deliverDue } as const
}
