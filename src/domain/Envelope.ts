import { Schema } from "effect"

/** A wait the caller is blocked on, as carried in `_blocking` on every response while it is open. */
export const BlockingItem = Schema.Struct({
  wait_id: Schema.String,
  on: Schema.Struct({ connection_id: Schema.String, connection_short: Schema.String, agent_name: Schema.String }),
  predicate: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  expires_at: Schema.String
})
export type BlockingItem = typeof BlockingItem.Type

export const WaitResolution = Schema.Literal("satisfied", "unsatisfied", "unverifiable")
export type WaitResolution = typeof WaitResolution.Type

/** A wait that resolved, carried once in `_wait_resolved` on the first response after it resolved. */
export const WaitResolvedItem = Schema.Struct({
  wait_id: Schema.String,
  resolution: WaitResolution,
  resolved_by: Schema.NullOr(Schema.String),
  how: Schema.String,
  resolved_at: Schema.String
})
export type WaitResolvedItem = typeof WaitResolvedItem.Type

/** The fields spliced into every tool result (and every refusal). */
export const EnvelopeFields = Schema.Struct({
  _inbox_unread: Schema.Number.annotations({ description: "your global unread count" }),
  _blocking: Schema.optional(Schema.Array(BlockingItem)),
  _wait_resolved: Schema.optional(Schema.Array(WaitResolvedItem))
})
export type EnvelopeFields = typeof EnvelopeFields.Type
