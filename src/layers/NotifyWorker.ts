import { Clock, Config, Effect, FiberSet, Layer, Option, Queue } from "effect"
import type { DomainEventTag } from "../domain/Events.js"
import * as Http from "../mcp/Http.js"
import { Events } from "../services/Events.js"
import { Notifications } from "../services/Notifications.js"

/** The events whose subscribers may have queued a notification (here, or on another daemon: its NOTIFY arrives here too). */
const QUEUEING: ReadonlySet<DomainEventTag> = new Set([
  "ApprovalRequested",
  "ApprovalDecided",
  "WaitResolved",
  "ConnectionRevoked",
  "ConnectionSilent"
])

/** Sends in flight at once in one daemon: past this, due rows wait for the next look (or another daemon). */
const IN_FLIGHT = 64

/**
 * The notifications' worker (docs/architecture.md, "Notifications"): a scoped fiber of the served daemon that
 * sends what the outbox holds. It looks when a committed event may have queued something (an `Events` listener:
 * a receiver hears `approval_requested` right after the gated call's commit), when this process queued a test or
 * a retry, when the next retry falls due, and at least every `SOPHIA_NOTIFY_POLL_MS` (1000) for what another
 * process queued without telling it (the CLI, a stdio agent on the same SQLite file) — a look is one indexed
 * read; only a due row takes a write. Each claimed row is sent on a fiber of its own (at most 64 in flight), so a
 * target that hangs until its 10 s timeout never holds back another's notification; a send that ends wakes the
 * loop (a retry may be due sooner than it planned to look). Links are made absolute on `SOPHIA_PUBLIC_URL`, else this daemon's own
 * address. A failed look is logged and the loop goes on; the fiber ends with the app's scope.
 */
export const NotifyWorker = Layer.scopedDiscard(Effect.gen(function*() {
  const notifications = yield* Notifications
  const events = yield* Events
  const http = yield* Http.HttpServer
  const publicUrl = yield* Config.option(Config.string("SOPHIA_PUBLIC_URL")).pipe(Effect.orDie)
  const baseUrl = Option.getOrElse(Option.filter(publicUrl, (u) => u.trim() !== ""), () => http.baseUrl)
  const pollMs = yield* Config.integer("SOPHIA_NOTIFY_POLL_MS").pipe(Config.withDefault(1000), Effect.orDie)
  const wake = yield* Queue.dropping<void>(1)
  const committed = yield* events.listen
  yield* Queue.take(committed).pipe(
    Effect.flatMap((event) => (QUEUEING.has(event._tag) ? Queue.offer(wake, undefined) : Effect.void)),
    Effect.forever,
    Effect.annotateLogs({ fiber: "notify-wake" }),
    Effect.forkScoped
  )
  yield* notifications.nudged.pipe(Effect.zipRight(Queue.offer(wake, undefined)), Effect.forever, Effect.forkScoped)
  const sends = yield* FiberSet.make<boolean>()
  const look = Effect.gen(function*() {
    const next = yield* notifications.nextDue()
    const now = yield* Clock.currentTimeMillis
    if (next !== null && Date.parse(next) <= now && (yield* FiberSet.size(sends)) < IN_FLIGHT) {
      for (const row of yield* notifications.claimDue()) {
        yield* FiberSet.run(sends, notifications.sendClaimed(row, baseUrl).pipe(
          Effect.ensuring(Queue.offer(wake, undefined)),
          Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("a notification's send failed; it is due again after its claim", cause), false))
        ))
      }
      return
    }
    const until = next === null || Date.parse(next) <= now ? pollMs : Math.min(pollMs, Date.parse(next) - now)
    yield* Effect.race(Queue.take(wake), Effect.sleep(until))
  })
  yield* look.pipe(
    Effect.catchAllCause((cause) => Effect.zipRight(Effect.logWarning("notification look failed; looking again", cause), Effect.sleep(pollMs))),
    Effect.forever,
    Effect.annotateLogs({ fiber: "notify" }),
    Effect.forkScoped
  )
}))
