import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { BlockingItem, WaitResolvedItem } from "../../domain/Envelope.js"
import { WaitResolution } from "../../domain/Envelope.js"
import { connectionRef, SignalFlags } from "../../domain/Waits.js"
import { Auth } from "../Auth.js"
import { makeStatements } from "../store/Statements.js"

/**
 * The envelope signals of one caller: `_blocking` (its open waits, names joined live) and `_wait_resolved`
 * (resolutions not yet delivered — claimed by a conditional update, so each is delivered exactly once even
 * to concurrent calls). They run on every response of every tool (the envelope): untraced, and one
 * statement when the caller has nothing open and nothing to deliver.
 */

const JsonObject = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const BlockingRow = Schema.Struct({
  id: Schema.String,
  on_connection_id: Schema.String,
  predicate: JsonObject,
  expires_at: Schema.String
})
const decodeBlocking = Schema.decodeUnknown(Schema.Array(BlockingRow))

const ResolvedRow = Schema.Struct({
  id: Schema.String,
  status: WaitResolution,
  resolved_by: Schema.NullOr(Schema.String),
  how: Schema.String,
  resolved_at: Schema.String
})
const decodeResolved = Schema.decodeUnknown(Schema.Array(ResolvedRow))
const decodeFlags = Schema.decodeUnknown(Schema.Tuple(SignalFlags))
const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))

/** A page of undelivered resolutions claimed by one statement of its shape; more (rare) go the ordinary way. */
const CLAIM_MAX_VALUES = 65

const noBlocking: ReadonlyArray<BlockingItem> = []
const noResolved: ReadonlyArray<WaitResolvedItem> = []

export interface Signals {
  readonly blocking: ReadonlyArray<BlockingItem>
  readonly resolved: ReadonlyArray<WaitResolvedItem>
}

export const makeSignals = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const auth = yield* Auth
  const { named, shaped } = yield* makeStatements

  const flagsOf = named("Waits.flags", (p: { waiter: string }) =>
    sql`SELECT EXISTS (SELECT 1 FROM waits WHERE waiter_connection_id = ${p.waiter} AND status = 'open') AS open,
      EXISTS (SELECT 1 FROM waits WHERE waiter_connection_id = ${p.waiter} AND status <> 'open' AND delivered_at IS NULL) AS undelivered`)

  /**
   * The caller's two flags (an open wait, a resolution not yet delivered): one statement over the partial
   * indexes `waits_open_waiter` and `waits_undelivered`. Runs on every response of every tool: untraced.
   */
  const flags = (caller: Caller): Effect.Effect<SignalFlags> =>
    flagsOf({ waiter: caller.connectionId }).pipe(
      Effect.flatMap(decodeFlags),
      Effect.map(([f]) => f),
      Effect.catchTag("SqlError", "ParseError", Effect.die)
    )

  const undeliveredIds = named("Waits.undelivered", (p: { waiter: string }) =>
    sql`SELECT id FROM waits WHERE waiter_connection_id = ${p.waiter} AND status <> 'open' AND delivered_at IS NULL`)
  const claim = shaped("Waits.claim", CLAIM_MAX_VALUES, (p: { at: string; ids: ReadonlyArray<string> }) =>
    sql`UPDATE waits SET delivered_at = ${p.at}
      WHERE ${sql.in("id", p.ids)} AND delivered_at IS NULL
      RETURNING id, status, resolved_by, how, resolved_at`)
  const openOfWaiter = named("Waits.blocking", (p: { waiter: string }) =>
    sql`SELECT id, on_connection_id, predicate, expires_at FROM waits
      WHERE waiter_connection_id = ${p.waiter} AND status = 'open'
      ORDER BY created_at, id`)

  /** Claim the caller's undelivered resolutions: each goes to exactly one response. */
  const deliver = (caller: Caller) =>
    Effect.gen(function*() {
      const undelivered = yield* Effect.flatMap(undeliveredIds({ waiter: caller.connectionId }), decodeIds)
      // another response of the caller claimed them between its flags and this read
      if (undelivered.length === 0) return noResolved
      const at = new Date(yield* Clock.currentTimeMillis).toISOString()
      const claimed = yield* Effect.flatMap(claim({ at, ids: undelivered.map((r) => r.id) }), decodeResolved)
      return claimed.map((r): WaitResolvedItem => ({
        wait_id: r.id,
        resolution: r.status,
        resolved_by: r.resolved_by,
        how: r.how,
        resolved_at: r.resolved_at
      }))
    })

  /** The caller's open waits, each naming whom it is on (names joined live). */
  const blockingOf = (caller: Caller) =>
    Effect.gen(function*() {
      const open = yield* Effect.flatMap(openOfWaiter({ waiter: caller.connectionId }), decodeBlocking)
      const names = yield* auth.connections(open.map((w) => w.on_connection_id))
      return open.map((w): BlockingItem => ({
        wait_id: w.id,
        on: connectionRef(w.on_connection_id, names.get(w.on_connection_id)?.name ?? ""),
        predicate: w.predicate,
        expires_at: w.expires_at
      }))
    })

  /**
   * The signals once the flags are read (by `signals`, or by the envelope, which reads them beside the
   * unread count). Nothing open and nothing to deliver: no statement at all. `deliver: false` leaves the
   * resolutions for a later response.
   */
  const signalsAfter = (caller: Caller, flags: SignalFlags, deliverNow = true): Effect.Effect<Signals> =>
    Effect.gen(function*() {
      const resolved = deliverNow && flags.undelivered ? yield* deliver(caller) : noResolved
      const blocking = flags.open ? yield* blockingOf(caller) : noBlocking
      return { blocking, resolved }
    }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))

  /** The flags, then the signals: one statement when idle. */
  const signals = (caller: Caller, deliverNow = true): Effect.Effect<Signals> =>
    Effect.flatMap(flags(caller), (f) => signalsAfter(caller, f, deliverNow))

  return { flags, signals, signalsAfter } as const
})
