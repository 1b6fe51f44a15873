import { Schema } from "effect"
import { connectionShort } from "./Auth.js"
import { OrphanedWork, OrphanReason } from "./Orphans.js"
import { ChannelName, PostKind } from "./Coordination.js"
import { BlockingItem, WaitResolution } from "./Envelope.js"

/**
 * Waits: declarative blocking. A wait is a post the whole fleet can see, naming who is blocked on whom
 * and on what predicate; it resolves three ways — satisfied | unsatisfied | unverifiable — and never
 * reports `satisfied` on a reading the system could not make.
 */

/** A SQL truth value as it comes back: 0/1 on SQLite, a boolean on Postgres. */
export const SqlBoolean = Schema.transform(Schema.Union(Schema.Number, Schema.Boolean, Schema.NumberFromString), Schema.Boolean, {
  strict: true,
  decode: (v) => v === true || v === 1,
  encode: (b) => b
})

/**
 * What the envelope needs to know of a caller's waits before reading any: does it have an open wait
 * (`_blocking`), a resolution not yet delivered (`_wait_resolved`)? Read by one probe per response.
 */
export const SignalFlags = Schema.Struct({ open: SqlBoolean, undelivered: SqlBoolean })
export type SignalFlags = typeof SignalFlags.Type

/** The fleet-visible channel the wait posts go to (addressed `to` the awaited connection). */
export const WAIT_CHANNEL = "waits"

const Channel = ChannelName

/** A post exists in `channel` (of `kind`, by `from` — default: the awaited connection — after `after_seq`). */
export const PostExists = Schema.Struct({
  type: Schema.Literal("post_exists"),
  channel: Channel,
  kind: Schema.optional(PostKind),
  from: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))).annotations({
    description: "author selector; default: the connection you wait on"
  }),
  after_seq: Schema.optional(Schema.Int.pipe(Schema.nonNegative())).annotations({
    description: "only posts after this channel_seq count; default: the channel's current seq"
  })
})
export type PostExists = typeof PostExists.Type

/** The channel's sequence reached `seq`. */
export const SeqReached = Schema.Struct({
  type: Schema.Literal("seq_reached"),
  channel: Channel,
  seq: Schema.Int.pipe(Schema.positive())
})
export type SeqReached = typeof SeqReached.Type

/** The resource could be granted to the waiter now: no live holder's lease stands in its way (leases). */
export const LeaseFree = Schema.Struct({
  type: Schema.Literal("lease_free"),
  resource: Schema.String.pipe(Schema.maxLength(500)),
  project: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)))
})
export type LeaseFree = typeof LeaseFree.Type

export const Predicate = Schema.Union(PostExists, SeqReached, LeaseFree)
export type Predicate = typeof Predicate.Type

export const DeclareWaitInput = Schema.Struct({
  on: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))).annotations({
    description: "who blocks you: connection id, 8-char short id, or name (lease_free: a holder)"
  }),
  predicate: Predicate,
  reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000)),
  timeout_s: Schema.optional(Schema.Number.pipe(Schema.positive(), Schema.finite())).annotations({
    description: "seconds; default 600, clamped to the ceiling (3600)"
  })
})
export type DeclareWaitInput = typeof DeclareWaitInput.Type

export const DeclareWaitResult = Schema.Struct({
  wait_id: Schema.String,
  post_id: Schema.String,
  expires_at: Schema.String,
  /** set when the predicate already held at declaration */
  resolution: Schema.optional(WaitResolution),
  warning: Schema.optional(Schema.String)
})
export type DeclareWaitResult = typeof DeclareWaitResult.Type

export const CancelWaitInput = Schema.Struct({ wait_id: Schema.String })
export const CancelWaitResult = Schema.Struct({ wait_id: Schema.String, status: Schema.Literal("cancelled") })

export const ConnectionRef = BlockingItem.fields.on
export type ConnectionRef = typeof ConnectionRef.Type

/** A connection as a wait names it: its id, short id and name (joined live by the caller). */
export const connectionRef = (connectionId: string, name: string): ConnectionRef => ({
  connection_id: connectionId,
  connection_short: connectionShort(connectionId),
  agent_name: name
})

export const WaitEdge = Schema.Struct({
  wait_id: Schema.String,
  waiter: ConnectionRef,
  on: ConnectionRef,
  predicate: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  reason: Schema.String,
  expires_at: Schema.String
})
export type WaitEdge = typeof WaitEdge.Type

export const WAIT_EDGE_COMPACT = ["wait_id", "waiter", "on", "expires_at"] as const

export const WaitGraphResult = Schema.Struct({
  edges: Schema.Array(WaitEdge),
  cycles: Schema.Array(Schema.Array(ConnectionRef)),
  /** complete: waits on, and open work items claimed by, connections that are revoked or silent */
  orphaned: Schema.Struct({
    waits: Schema.Array(Schema.Struct({
      wait_id: Schema.String,
      connection_id: Schema.String,
      on: ConnectionRef,
      reason: OrphanReason,
      /** the same as reason (the name of wave 1) */
      why: OrphanReason,
      since: Schema.String
    })),
    work: Schema.Array(OrphanedWork),
    silent_after_s: Schema.Number
  })
})
export type WaitGraphResult = typeof WaitGraphResult.Type

/**
 * A wait — or a lease (`resources`: what it asked) whose grant would make a waiter wait on its holder — that
 * would close a cycle of waits: the cycle, its first connection the caller.
 */
export class WaitCycle extends Schema.TaggedError<WaitCycle>()("WaitCycle", {
  cycle: Schema.Array(ConnectionRef),
  resources: Schema.optional(Schema.Array(Schema.String)),
  hint: Schema.optional(Schema.String)
}) {
  override get message() {
    const path = this.cycle.map((c) => `${c.agent_name} [${c.connection_short}]`).join(" → ")
    return this.resources === undefined
      ? `this wait would close a cycle: ${path}`
      : `granting ${this.resources.join(", ")} would close a cycle of waits: ${path}`
  }
}

/** `sophia.wait_graph` takes no arguments. */
export const WaitGraphInput = Schema.Struct({})
