import { Schema } from "effect"
import { LeaseRow } from "./Leases.js"
import { ConnectionInfo } from "./Auth.js"
import { WorkSummary } from "./Ledger.js"

/**
 * The owner's portal (docs/architecture.md, "The owner's portal"): a browser session opened by a one-time login link,
 * carried by the `sophia_portal` cookie, acting as the owner through the portal's own connection row.
 */

export const PORTAL_COOKIE = "sophia_portal"
/** a login link is valid this long, and once */
export const LOGIN_LINK_TTL_MS = 10 * 60_000
/** a session lasts this long unless `SOPHIA_PORTAL_SESSION_HOURS` says otherwise */
export const DEFAULT_SESSION_HOURS = 12

/** A login link that is unknown, already used or expired: it opens nothing, and says so the same way. */
export class PortalLoginRefused extends Schema.TaggedError<PortalLoginRefused>()("PortalLoginRefused", {
  reason: Schema.Literal("unknown", "used", "expired")
}) {
  override get message() {
    return `this login link is ${this.reason === "unknown" ? "not valid" : this.reason === "used" ? "already used" : "expired"}; run \`sophia portal\` for a new one`
  }
}

/**
 * An approve link (a notification's `links.approve`: a one-time login limited to one approval) that is unknown,
 * already used, expired, or for another approval: it opens nothing.
 */
export class ApproveLinkRefused extends Schema.TaggedError<ApproveLinkRefused>()("ApproveLinkRefused", {
  reason: Schema.Literal("unknown", "used", "expired")
}) {
  override get message() {
    return `this approve link is ${
      this.reason === "unknown" ? "not valid" : this.reason === "used" ? "already used" : "expired (it is valid 15 minutes)"
    }; open the approval from the portal (\`sophia portal\` prints a login link)`
  }
}

/** A freshly minted one-time login token (shown once, stored as a hash). */
export interface PortalLogin {
  readonly token: string
  readonly expires_at: string
}

/** A session opened by a login: the cookie value (shown once, stored as a hash) and its CSRF token. */
export interface PortalSessionOpened {
  readonly session_token: string
  readonly csrf: string
  readonly expires_at: string
  readonly max_age_s: number
}

/** A live session, as a request finds it. */
export interface PortalSession {
  readonly session_id: string
  readonly user_id: string
  readonly csrf: string
  readonly expires_at: string
  /** the one approval a session opened by an approve link may see and decide (null: the owner's full session) */
  readonly approval_id: string | null
}

/**
 * One connection on the Fleet page: its row, its global unread count, its open waits (as the waiter), the
 * open work it holds the claim on, and whether it is the portal's own connection. A revoked connection
 * has nothing unread, waiting or claimed.
 */
export const FleetConnection = Schema.Struct({
  connection: ConnectionInfo,
  unread: Schema.Number,
  open_waits: Schema.Number,
  claimed: Schema.Array(WorkSummary),
  /** the active leases it holds (a revoked holder's are orphaned, still held until taken over or ended) */
  leases: Schema.Array(LeaseRow),
  is_portal: Schema.Boolean
})
export type FleetConnection = typeof FleetConnection.Type

/** The Fleet page's read model: every connection of every user, in `Auth.list` order. */
export const FleetView = Schema.Struct({
  connections: Schema.Array(FleetConnection)
})
export type FleetView = typeof FleetView.Type
