import { Schema } from "effect"

/** What a connection may do (the access table: Access.ts). `portal` is the owner's browser session. */
export const PROFILES = ["observer", "assistant", "full"] as const
export const Profile = Schema.Literal(...PROFILES)
export type Profile = typeof Profile.Type

/** The access class every tool declares; the one authorization function decides from it and the profile. */
export const ACCESS_CLASSES = ["read", "coordinate", "write", "elevated"] as const
export const AccessClass = Schema.Literal(...ACCESS_CLASSES)
export type AccessClass = typeof AccessClass.Type

export const UserId = Schema.String.pipe(Schema.brand("UserId"))
export type UserId = typeof UserId.Type
export const ConnectionId = Schema.UUID.pipe(Schema.brand("ConnectionId"))
export type ConnectionId = typeof ConnectionId.Type

/** A connection's display name: what other agents see (joined live), unique per user among live connections. */
export const ConnectionName = Schema.String.pipe(
  Schema.trimmed(),
  Schema.minLength(1),
  Schema.maxLength(64),
  Schema.pattern(/^[^\s].*$/)
)

/** The authenticated party of one call. Everything a service needs to know about "who" comes from here. */
export interface Caller {
  readonly userId: UserId
  readonly connectionId: ConnectionId
  /** first 8 hex characters of the connection id; never moves */
  readonly connectionShort: string
  readonly name: string
  readonly profile: Profile | "portal"
  /** entity ids this connection may read; empty = all */
  readonly entityScope: ReadonlyArray<string>
  /**
   * the owner allowed this connection's own MCP client to approve its plain writes by answering elicitation;
   * absent or false: the owner decides every gated call
   */
  readonly allowElicitation?: boolean
}

export const connectionShort = (id: string): string => id.slice(0, 8)

/** A connection as listed by the CLI and `orient` (never its token or hash). */
export const ConnectionInfo = Schema.Struct({
  connection_id: Schema.String,
  connection_short: Schema.String,
  name: Schema.String,
  profile: Profile,
  user_id: Schema.String,
  user_name: Schema.String,
  entity_scope: Schema.Array(Schema.String),
  created_at: Schema.String,
  revoked_at: Schema.NullOr(Schema.String),
  last_seen_at: Schema.NullOr(Schema.String),
  /** its own MCP client's elicitation answer may approve its plain writes (the owner's allowance; off by default) */
  allow_elicitation: Schema.Boolean
})
export type ConnectionInfo = typeof ConnectionInfo.Type

/** The outcome of the access rules for one profile and one access class. */
export type AccessDecision = "allow" | "approval" | "owner_approval" | "forbidden"
