import { Effect, Fiber, Option, Queue, Runtime, Schedule } from "effect"
import type * as http from "node:http"
import type { DomainEvent } from "../../domain/Events.js"
import type { PortalSession } from "../../domain/Portal.js"
import { Approvals } from "../../services/Approvals.js"
import { Events } from "../../services/Events.js"
import { Portal } from "../../services/Portal.js"
import { StoreVersion } from "../../services/store/Statements.js"
import { SECURITY_HEADERS, sessionCookieOf } from "./Web.js"

/** Which live regions a committed event refreshes (the names a page's `data-live` lists). */
const liveNamesOf = (event: DomainEvent): ReadonlyArray<string> => {
  switch (event._tag) {
    case "PostLanded":
      return event.channel === "waits" ? ["posts", "waits", "fleet"] : ["posts", "fleet"]
    case "WaitResolved":
      return ["waits", "fleet"]
    case "ConnectionCreated":
      return ["fleet"]
    case "ConnectionRevoked":
    case "ConnectionSilent":
      return ["fleet", "waits"]
    case "ApprovalRequested":
    case "ApprovalDecided":
      return ["approvals"]
    case "LedgerAppended":
      return ["ledger", "fleet"]
    case "KnowledgeChanged":
      return ["knowledge"]
    case "LeaseChanged":
      return ["fleet"]
  }
}

/** The Approvals page lists every user's approvals; everything else the portal shows is the session user's. */
const concernsSession = (event: DomainEvent, session: PortalSession) =>
  event._tag === "ApprovalRequested" || event._tag === "ApprovalDecided" || event.user_id === session.user_id

/**
 * The portal's live stream (`/portal/events`): every committed domain event that concerns the session,
 * named by the regions it refreshes, as Server-Sent Events — a new approval (`ApprovalRequested`) as
 * much as a post. The page re-fetches its region on the names it lists (assets/portal.js). Events come
 * from this daemon's commits and, on Postgres, every other daemon's (layers/CrossDaemon.ts).
 */
export const makeLiveStream = Effect.gen(function*() {
  const events = yield* Events
  const portal = yield* Portal
  const approvals = yield* Approvals
  const version = yield* Effect.serviceOption(StoreVersion)
  const runFork = Runtime.runFork(yield* Effect.runtime<never>())

  /**
   * Approvals asked or decided by another process on the same SQLite file (a stdio agent, the `sophia
   * approvals` CLI) publish no event here: when the store moved (its version, a few µs to read) and the
   * approvals' stamp changed, the approvals region refreshes — within a second, and one statement only after
   * a commit. Postgres relays every daemon's events (layers/CrossDaemon.ts) and offers no version: nothing
   * to do there.
   */
  const foreignApprovals = (write: (name: string, data: unknown) => Effect.Effect<void>): Effect.Effect<never> =>
    Option.isNone(version) ? Effect.never : Effect.gen(function*() {
      let seen = version.value.current()
      let stamp = yield* approvals.stamp()
      while (true) {
        yield* Effect.sleep("1 second")
        const now = version.value.current()
        if (now === seen) continue
        seen = now
        const next = yield* approvals.stamp()
        if (next === stamp) continue
        stamp = next
        yield* write("approvals", { _tag: "ApprovalsChanged" })
      }
    })

  const stream = (req: http.IncomingMessage, res: http.ServerResponse, session: PortalSession) => {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
      ...SECURITY_HEADERS
    })
    res.write("retry: 1000\n\n")
    const write = (name: string, data: unknown) => Effect.sync(() => void res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`))
    const program = Effect.scoped(Effect.gen(function*() {
      const queue = yield* events.listen
      yield* write("ready", { at: new Date().toISOString() })
      const pump = Queue.take(queue).pipe(
        Effect.flatMap((event) =>
          concernsSession(event, session) ? Effect.forEach(liveNamesOf(event), (name) => write(name, event), { discard: true }) : Effect.void
        ),
        Effect.forever
      )
      const heartbeat = Effect.sync(() => void res.write(": keep-alive\n\n")).pipe(Effect.repeat(Schedule.spaced("15 seconds")))
      // the session may be logged out or expire while the stream is open: it then ends
      const stillValid = portal.session(sessionCookieOf(req)).pipe(
        Effect.repeat({ schedule: Schedule.spaced("5 seconds"), while: Option.isSome })
      )
      yield* Effect.raceFirst(Effect.all([pump, heartbeat, foreignApprovals(write)], { concurrency: "unbounded", discard: true }), stillValid)
    }))
    const fiber = runFork(program.pipe(Effect.ensuring(Effect.sync(() => res.end()))))
    req.on("close", () => runFork(Fiber.interrupt(fiber)))
  }

  return { stream } as const
})
