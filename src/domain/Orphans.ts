import { Config, Schema } from "effect"

/**
 * Orphans: waits on, and work items claimed by, a connection that can no longer act — revoked, or silent
 * (no call and no beacon for `SOPHIA_SILENT_AFTER_S`). One rule, used by the wait graph, orient and the
 * ledger's takeover check.
 */

export const ORPHAN_REASONS = ["revoked", "silent"] as const
export const OrphanReason = Schema.Literal(...ORPHAN_REASONS)
export type OrphanReason = typeof OrphanReason.Type

/** Seconds without a call or a beacon after which a connection counts as silent (the older wait-only name still read). */
export const silentAfterSConfig = Config.number("SOPHIA_SILENT_AFTER_S").pipe(
  Config.orElse(() => Config.number("SOPHIA_WAIT_SILENT_AFTER_S")),
  Config.withDefault(900)
)

export interface Orphaning {
  readonly reason: OrphanReason
  /** when it became so: the revocation, or the last time it was seen (its creation if never) */
  readonly since: string
}

/** Why a connection is gone (undefined: it is live). */
export const orphanOf = (
  connection: { readonly revoked_at: string | null; readonly last_seen_at: string | null; readonly created_at: string } | undefined,
  nowMs: number,
  silentAfterS: number
): Orphaning | undefined => {
  if (connection === undefined) return undefined
  if (connection.revoked_at !== null) return { reason: "revoked", since: connection.revoked_at }
  const seen = connection.last_seen_at ?? connection.created_at
  return Date.parse(seen) < nowMs - silentAfterS * 1000 ? { reason: "silent", since: seen } : undefined
}

/** A work item whose claimant is gone: another connection may take it over (recorded as `claim_takeover`). */
export const OrphanedWork = Schema.Struct({
  work_id: Schema.String,
  title: Schema.String,
  connection_id: Schema.String,
  reason: OrphanReason,
  since: Schema.String
})
export type OrphanedWork = typeof OrphanedWork.Type

/** The field of the server's `observed` event that records a takeover (its value names the previous claimant). */
export const CLAIM_TAKEOVER_FIELD = "claim_takeover"
