import { Schema } from "effect"
import { OrphanReason } from "./Orphans.js"

/**
 * Leases: an agent holds files (`path:<glob>`) and shared resources (`slot:<name>`) for a while, all or
 * nothing, exclusive or shared. Which paths a glob covers and when two conflict: `LeaseGlobs.ts`.
 */

export const LEASE_TTL_DEFAULT_S = 1800
export const LEASE_TTL_CEILING_S = 86400
export const LEASE_WAIT_CEILING_S = 60
export const DEFAULT_PROJECT = "default"
export const MAX_LEASE_RESOURCES = 32

export const LeaseMode = Schema.Literal("exclusive", "shared")
export type LeaseMode = typeof LeaseMode.Type

/** `path:<glob>` or `slot:<name>` (checked further, and normalized, by `parseResource`). */
export const LeaseResource = Schema.String.pipe(Schema.maxLength(500), Schema.pattern(/^(path|slot):./s))
export const LeaseProject = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
const LeaseId = Schema.String.pipe(Schema.maxLength(100))
const TtlS = Schema.Int.pipe(Schema.between(1, LEASE_TTL_CEILING_S))

export const LeaseAcquireInput = Schema.Struct({
  resources: Schema.Array(LeaseResource).pipe(Schema.minItems(1), Schema.maxItems(MAX_LEASE_RESOURCES)).annotations({
    description: "path:<glob> (picomatch; a plain path holds what is below it) | slot:<name>"
  }),
  mode: Schema.optional(LeaseMode).annotations({ description: "default exclusive; shared conflicts only with exclusive" }),
  ttl_s: Schema.optional(TtlS).annotations({ description: `default ${LEASE_TTL_DEFAULT_S}` }),
  reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000)),
  work_id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))),
  project: Schema.optional(LeaseProject).annotations({ description: `default "${DEFAULT_PROJECT}"` }),
  capacity: Schema.optional(Schema.Int.pipe(Schema.between(1, 1000))).annotations({
    description: "a new slot's holders (default 1)"
  }),
  wait_s: Schema.optional(Schema.Number.pipe(Schema.between(0, LEASE_WAIT_CEILING_S))).annotations({
    description: "wait until grantable"
  })
})
export type LeaseAcquireInput = typeof LeaseAcquireInput.Type

/** An orphaned lease another connection took over (recorded with the new lease). */
export const LeaseTakeover = Schema.Struct({
  lease_id: Schema.String,
  connection_id: Schema.String,
  reason: OrphanReason,
  since: Schema.String
})
export type LeaseTakeover = typeof LeaseTakeover.Type

export const LeaseGrant = Schema.Struct({
  lease_id: Schema.String,
  resources: Schema.Array(Schema.String),
  mode: LeaseMode,
  project: Schema.String,
  expires_at: Schema.String,
  /** the orphaned leases this one took over (`leases` says whose, why and since when) */
  took_over: Schema.optional(Schema.Array(Schema.String))
})
export type LeaseGrant = typeof LeaseGrant.Type

export const LeaseRenewInput = Schema.Struct({ lease_id: LeaseId, ttl_s: Schema.optional(TtlS) })
export type LeaseRenewInput = typeof LeaseRenewInput.Type
export const LeaseRenewResult = Schema.Struct({ lease_id: Schema.String, expires_at: Schema.String })

export const LeaseReleaseInput = Schema.Struct({ lease_id: LeaseId })
export const LeaseReleaseResult = Schema.Struct({ lease_id: Schema.String, status: Schema.Literal("released") })

export const LeasesInput = Schema.Struct({
  project: Schema.optional(LeaseProject),
  resource: Schema.optional(Schema.String.pipe(Schema.maxLength(500))).annotations({ description: "only leases overlapping it" }),
  mine: Schema.optional(Schema.Boolean)
})
export type LeasesInput = typeof LeasesInput.Type

/** An active lease as `leases`, `orient` and the portal show it. */
export const LeaseRow = Schema.Struct({
  lease_id: Schema.String,
  connection_id: Schema.String,
  agent_name: Schema.String,
  resources: Schema.Array(Schema.String),
  mode: LeaseMode,
  project: Schema.String,
  reason: Schema.String,
  work_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  expires_at: Schema.String,
  mine: Schema.Boolean,
  /** its holder is revoked or silent: another connection may take it over with lease_acquire */
  orphaned: Schema.optional(Schema.Struct({ reason: OrphanReason, since: Schema.String })),
  took_over: Schema.optional(Schema.Array(LeaseTakeover))
})
export type LeaseRow = typeof LeaseRow.Type

/** `compact: true` rows of `leases`. */
export const LEASE_ROW_COMPACT = ["lease_id", "agent_name", "resources", "mode", "expires_at"] as const

export const LeasesResult = Schema.Struct({ leases: Schema.Array(LeaseRow) })
export type LeasesResult = typeof LeasesResult.Type

/** One lease standing in the way of another: who holds what, how, until when and why. */
export const LeaseHolder = Schema.Struct({
  lease_id: Schema.String,
  connection_id: Schema.String,
  agent_name: Schema.String,
  resource: Schema.String,
  mode: LeaseMode,
  expires_at: Schema.String,
  reason: Schema.String
})
export type LeaseHolder = typeof LeaseHolder.Type

/** The lease asked for conflicts with leases of live holders: nothing was granted. */
export class LeaseConflict extends Schema.TaggedError<LeaseConflict>()("LeaseConflict", {
  holders: Schema.Array(LeaseHolder),
  hint: Schema.String
}) {
  override get message() {
    const who = this.holders.map((h) =>
      `${h.resource} held ${h.mode} by ${h.agent_name} [${h.connection_id.slice(0, 8)}] until ${h.expires_at} (${h.reason})`
    )
    return `not granted (all or nothing): ${who.join("; ")}`
  }
}
