/**
 * Cross-daemon wake-ups over Postgres LISTEN/NOTIFY. Every daemon on one database forwards the domain
 * events its own writes committed (`Events.listen`) as one NOTIFY each on `sophia_events`, and hands the
 * events it hears from the other daemons to its own listeners (`Events.deliver`): long polls,
 * subscriptions, the portal's live view and anything else that listens wake on a write made anywhere,
 * without waiting for a sweep. State never travels this way — a listener re-reads the database — so a
 * lost notification (a daemon restarting) delays a wake-up, it never loses a write.
 *
 * On SQLite (one daemon per file, or processes that share nothing but the file) the layer does nothing.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { Deferred, Duration, Effect, Layer, Option, Queue, Schedule, Schema, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { DomainEvent } from "../domain/Events.js"
import { Events } from "../services/Events.js"

export const NOTIFY_CHANNEL = "sophia_events"

const Envelope = Schema.parseJson(Schema.Struct({
  /** the daemon that sent it (a daemon ignores its own) */
  o: Schema.String,
  /** a domain event, or absent for the start-up ping */
  e: Schema.optional(DomainEvent)
}))
const encode = Schema.encode(Envelope)
const decode = Schema.decodeUnknown(Envelope)

export const CrossDaemonEvents = Layer.scopedDiscard(Effect.gen(function*() {
  const found = yield* Effect.serviceOption(PgClient.PgClient)
  if (Option.isNone(found)) return
  const pg = found.value
  const events = yield* Events
  // one graph per schema: daemons on another schema of the same database (tests) hear nothing of this one
  const [{ schema }] = yield* Effect.orDie(pg<{ schema: string }>`SELECT current_schema() AS schema`)
  const channel = schema === "public" ? NOTIFY_CHANNEL : `${NOTIFY_CHANNEL}_${schema}`.slice(0, 63)
  const origin = randomUUID()
  // events that came from elsewhere are delivered locally and never sent back
  const fromElsewhere = new WeakSet<object>()
  const listening = yield* Deferred.make<void>()
  // (not `pg.notify`: NOTIFY takes no bound parameters; pg_notify does)
  const notify = (payload: string) => Effect.asVoid(pg`SELECT pg_notify(${channel}, ${payload})`)

  yield* pg.listen(channel).pipe(
    Stream.runForEach((payload) =>
      Effect.gen(function*() {
        const message = yield* decode(payload)
        if (message.o === origin) {
          if (message.e === undefined) yield* Deferred.succeed(listening, undefined)
          return
        }
        if (message.e === undefined) return
        fromElsewhere.add(message.e)
        yield* events.deliver(message.e)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("cross-daemon event dropped", cause)))
    ),
    Effect.catchAllCause((cause) => Effect.logWarning("LISTEN failed; retrying", cause)),
    Effect.repeat(Schedule.spaced(Duration.seconds(1))),
    Effect.annotateLogs({ fiber: "cross-daemon-listen" }),
    Effect.forkScoped
  )

  const local = yield* events.listen
  yield* Queue.take(local).pipe(
    Effect.flatMap((event) =>
      fromElsewhere.has(event)
        ? Effect.void
        : Effect.flatMap(encode({ o: origin, e: event }), notify)
    ),
    Effect.catchAllCause((cause) => Effect.logWarning("NOTIFY failed; event not forwarded", cause)),
    Effect.forever,
    Effect.annotateLogs({ fiber: "cross-daemon-notify" }),
    Effect.forkScoped
  )

  // serve only once this daemon hears the channel: ping ourselves until the ping comes back (bounded)
  const ping = Effect.flatMap(encode({ o: origin }), notify)
  yield* Effect.ignore(ping).pipe(
    Effect.zipRight(Effect.timeout(Deferred.await(listening), Duration.millis(200))),
    Effect.retry(Schedule.recurs(50)),
    Effect.catchAll(() => Effect.logWarning("cross-daemon channel not confirmed; serving anyway"))
  )
}))
