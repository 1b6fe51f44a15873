import { SqlClient } from "@effect/sql"
import { Clock, Config, Effect, Option, Schema } from "effect"
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto"
import type { Caller } from "../domain/Auth.js"
import { ConnectionId, connectionShort, UserId } from "../domain/Auth.js"
import type { PortalLogin, PortalSession, PortalSessionOpened } from "../domain/Portal.js"
import { APPROVE_LINK_TTL_MS } from "../domain/Notifications.js"
import { ApproveLinkRefused, DEFAULT_SESSION_HOURS, LOGIN_LINK_TTL_MS, PortalLoginRefused } from "../domain/Portal.js"
import { Auth } from "./Auth.js"
import { spanned } from "./Spans.js"
import { makeStatements } from "./store/Statements.js"

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")
const mint = (prefix: string) => prefix + randomBytes(32).toString("base64url")
const iso = (ms: number) => new Date(ms).toISOString()

/** The portal's connection row is named this (or `portal-2`, … when an agent already holds the name). */
const PORTAL_CONNECTION_NAME = "portal"

const decodeLogins = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  token_hash: Schema.String,
  user_id: Schema.String,
  expires_at: Schema.String,
  used_at: Schema.NullOr(Schema.String),
  approval_id: Schema.NullOr(Schema.String)
})))
const decodeSessions = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  csrf: Schema.String,
  expires_at: Schema.String,
  revoked_at: Schema.NullOr(Schema.String),
  approval_id: Schema.NullOr(Schema.String)
})))
const decodeIdentities = Schema.decodeUnknown(Schema.Array(Schema.Struct({ connection_id: Schema.String })))
const decodeOwners = Schema.decodeUnknown(Schema.Array(Schema.Struct({ user_id: Schema.String })))

/** Every statement on the portal's tables (`portal_logins`, `portal_sessions`, `portal_identity`), by name. */
const makePortalRows = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements
  const identityRows = named("Portal.identity", (p: { userId: string }) =>
    sql`SELECT connection_id FROM portal_identity WHERE user_id = ${p.userId}`)
  const ownerRows = named("Portal.owner", () => sql`SELECT user_id FROM portal_identity ORDER BY user_id LIMIT 1`)
  const loginRows = named("Portal.login", (p: { hash: string }) =>
    sql`SELECT token_hash, user_id, expires_at, used_at, approval_id FROM portal_logins WHERE token_hash = ${p.hash}`)
  const sessionRows = named("Portal.session", (p: { hash: string }) =>
    sql`SELECT id, user_id, csrf, expires_at, revoked_at, approval_id FROM portal_sessions WHERE token_hash = ${p.hash}`)
  return {
    sql,
    identityOf: (userId: string) =>
      Effect.map(Effect.flatMap(identityRows({ userId }), decodeIdentities), (rows) => Option.fromNullable(rows[0]?.connection_id)),
    recordIdentity: named("Portal.recordIdentity", (p: { userId: string; connectionId: string }) =>
      sql`INSERT INTO portal_identity (user_id, connection_id) VALUES (${p.userId}, ${p.connectionId})
        ON CONFLICT (user_id) DO UPDATE SET connection_id = ${p.connectionId}`),
    owner: Effect.map(Effect.flatMap(ownerRows({}), decodeOwners), (rows) => rows[0]?.user_id),
    login: (hash: string) => Effect.map(Effect.flatMap(loginRows({ hash }), decodeLogins), (rows) => rows[0]),
    insertLogin: named("Portal.insertLogin", (p: { hash: string; userId: string; at: string; expires: string }) =>
      sql`INSERT INTO portal_logins (token_hash, user_id, created_at, expires_at) VALUES (${p.hash}, ${p.userId}, ${p.at}, ${p.expires})`),
    insertApproveLogin: named("Portal.insertApproveLogin", (p: { hash: string; userId: string; at: string; expires: string; approvalId: string }) =>
      sql`INSERT INTO portal_logins (token_hash, user_id, created_at, expires_at, approval_id)
        VALUES (${p.hash}, ${p.userId}, ${p.at}, ${p.expires}, ${p.approvalId})`),
    // the conditional update that wins a link, once
    useLogin: named("Portal.useLogin", (p: { hash: string; at: string }) =>
      sql`UPDATE portal_logins SET used_at = ${p.at} WHERE token_hash = ${p.hash} AND used_at IS NULL RETURNING token_hash`),
    session: (hash: string) => Effect.map(Effect.flatMap(sessionRows({ hash }), decodeSessions), (rows) => rows[0]),
    insertSession: named("Portal.insertSession", (p: { id: string; hash: string; userId: string; csrf: string; at: string; expires: string }) =>
      sql`INSERT INTO portal_sessions (id, token_hash, user_id, csrf, created_at, expires_at)
        VALUES (${p.id}, ${p.hash}, ${p.userId}, ${p.csrf}, ${p.at}, ${p.expires})`),
    insertScopedSession: named("Portal.insertScopedSession", (p: {
      id: string
      hash: string
      userId: string
      csrf: string
      at: string
      expires: string
      approvalId: string
    }) =>
      sql`INSERT INTO portal_sessions (id, token_hash, user_id, csrf, created_at, expires_at, approval_id)
        VALUES (${p.id}, ${p.hash}, ${p.userId}, ${p.csrf}, ${p.at}, ${p.expires}, ${p.approvalId})`),
    endSession: named("Portal.logout", (p: { id: string; at: string }) =>
      sql`UPDATE portal_sessions SET revoked_at = ${p.at} WHERE id = ${p.id} AND revoked_at IS NULL`),
    endSessions: named("Portal.logoutAll", (p: { at: string }) =>
      sql`UPDATE portal_sessions SET revoked_at = ${p.at} WHERE revoked_at IS NULL AND expires_at > ${p.at} RETURNING id`)
  } as const
})
type PortalRows = Effect.Effect.Success<typeof makePortalRows>

/** The owner's portal connection: the recorded one while it is live, else a new row (recorded). */
const makeIdentity = (rows: PortalRows, auth: Effect.Effect.Success<typeof Auth>) => (userId: string | undefined) =>
  Effect.gen(function*() {
    if (userId !== undefined) {
      const known = yield* rows.identityOf(userId)
      if (Option.isSome(known)) {
        const info = yield* auth.get(known.value)
        if (Option.isSome(info) && info.value.revoked_at === null) return info.value
      }
    }
    let attempt = 1
    while (true) {
      const name = attempt === 1 ? PORTAL_CONNECTION_NAME : `${PORTAL_CONNECTION_NAME}-${attempt}`
      const minted = yield* auth.createConnection({ name, profile: "full" }).pipe(
        Effect.map(Option.some),
        Effect.catchTag("ValidationError", (e) => attempt < 20 ? Effect.succeed(Option.none()) : Effect.die(e))
      )
      if (Option.isSome(minted)) {
        const m = minted.value
        yield* rows.recordIdentity({ userId: m.user_id, connectionId: m.connection_id })
        return Option.getOrThrow(yield* auth.get(m.connection_id))
      }
      attempt++
    }
  })

/**
 * Approve links (docs/architecture.md, "Notifications"): one-time logins limited to one approval, and the sessions
 * they open, which see and decide that approval only.
 */
const makeApproveLinks = (rows: PortalRows, sql: SqlClient.SqlClient, sessionMs: number) => {
  /**
   * An approve link's token for a notification of `approvalId` (written in the transaction that writes the
   * notification): a one-time login limited to that approval, valid `APPROVE_LINK_TTL_MS`.
   */
  const mintApproveLink = spanned(
    "Portal.mintApproveLink",
    Effect.fnUntraced(function*(userId: string, approvalId: string) {
      const now = yield* Clock.currentTimeMillis
      const token = mint("spa_")
      const expires = iso(now + APPROVE_LINK_TTL_MS)
      yield* rows.insertApproveLogin({ hash: sha256(token), userId, at: iso(now), expires, approvalId })
      return { token, expires_at: expires } satisfies PortalLogin
    }, Effect.catchTag("SqlError", Effect.die))
  )

  /**
   * Redeem an approve link for `approvalId`, once: the session it opens sees and decides that approval only,
   * and lasts no longer than the link would have.
   */
  const redeemApproveLink = spanned(
    "Portal.redeemApproveLink",
    Effect.fnUntraced(function*(token: string, approvalId: string) {
      const now = yield* Clock.currentTimeMillis
      const hash = sha256(token)
      const login = yield* rows.login(hash)
      if (login === undefined || login.approval_id !== approvalId) return yield* new ApproveLinkRefused({ reason: "unknown" })
      if (login.used_at !== null) return yield* new ApproveLinkRefused({ reason: "used" })
      if (login.expires_at <= iso(now)) return yield* new ApproveLinkRefused({ reason: "expired" })
      const won = yield* rows.useLogin({ hash, at: iso(now) })
      if (won.length === 0) return yield* new ApproveLinkRefused({ reason: "used" })
      const sessionToken = mint("sps_")
      const csrf = randomBytes(32).toString("base64url")
      const lasts = Math.min(sessionMs, APPROVE_LINK_TTL_MS)
      const expires = iso(now + lasts)
      yield* rows.insertScopedSession({ id: randomUUID(), hash: sha256(sessionToken), userId: login.user_id, csrf, at: iso(now), expires, approvalId })
      return { session_token: sessionToken, csrf, expires_at: expires, max_age_s: Math.floor(lasts / 1000) } satisfies PortalSessionOpened
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  return { mintApproveLink, redeemApproveLink } as const
}

/**
 * The owner's browser sessions: one-time login links, sessions (revocable, expiring), CSRF tokens, and
 * the connection the portal acts as. The portal's caller has the `portal` profile (no elevated gate), and
 * its connection is a real row owned by the owner — what it writes is journaled as the owner's portal.
 * That row is a `full` connection whose bearer nobody ever sees (minted and dropped): only a portal
 * session can act as it.
 */
export class Portal extends Effect.Service<Portal>()("sophia/Portal", {
  effect: Effect.gen(function*() {
    const auth = yield* Auth
    const rows = yield* makePortalRows
    const { sql } = rows
    const identity = makeIdentity(rows, auth)
    const sessionHours = yield* Config.number("SOPHIA_PORTAL_SESSION_HOURS").pipe(
      Config.withDefault(DEFAULT_SESSION_HOURS),
      Effect.orDie
    )
    const sessionMs = Math.max(1, Math.round(sessionHours * 3_600_000))
    const nowMs = Effect.map(Clock.currentTimeMillis, iso)
    const { mintApproveLink, redeemApproveLink } = makeApproveLinks(rows, sql, sessionMs)

    /** The caller the portal acts as for a session's user: the portal connection with the `portal` profile. */
    const callerFor = spanned(
      "Portal.callerFor",
      Effect.fnUntraced(function*(userId?: string) {
        const info = yield* identity(userId)
        return {
          userId: UserId.make(info.user_id),
          connectionId: ConnectionId.make(info.connection_id),
          connectionShort: connectionShort(info.connection_id),
          name: info.name,
          profile: "portal",
          entityScope: []
        } satisfies Caller as Caller
      }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** The connection id the portal acts as for this user, if it has one (the Fleet page marks it). */
    const connectionOf = spanned(
      "Portal.connectionOf",
      (userId: string): Effect.Effect<Option.Option<string>> => rows.identityOf(userId).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** A one-time login link for the owner: valid `LOGIN_LINK_TTL_MS`, for one use. */
    const mintLogin = spanned(
      "Portal.mintLogin",
      Effect.fnUntraced(function*() {
        const info = yield* identity(yield* rows.owner)
        const now = yield* Clock.currentTimeMillis
        const token = mint("spl_")
        const expires = iso(now + LOGIN_LINK_TTL_MS)
        yield* rows.insertLogin({ hash: sha256(token), userId: info.user_id, at: iso(now), expires })
        return { token, expires_at: expires } satisfies PortalLogin
      }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /**
     * Redeem a login link: the conditional update wins it once; the session it opens is returned with its
     * cookie value and CSRF token (both shown once; the cookie is stored as a hash).
     */
    const redeem = spanned(
      "Portal.redeem",
      Effect.fnUntraced(function*(token: string) {
        const now = yield* Clock.currentTimeMillis
        const hash = sha256(token)
        const login = yield* rows.login(hash)
        // an approve link opens its approval only, never the whole portal
        if (login === undefined || login.approval_id !== null) return yield* new PortalLoginRefused({ reason: "unknown" })
        if (login.used_at !== null) return yield* new PortalLoginRefused({ reason: "used" })
        if (login.expires_at <= iso(now)) return yield* new PortalLoginRefused({ reason: "expired" })
        const won = yield* rows.useLogin({ hash, at: iso(now) })
        if (won.length === 0) return yield* new PortalLoginRefused({ reason: "used" })
        const sessionToken = mint("sps_")
        const csrf = randomBytes(32).toString("base64url")
        const expires = iso(now + sessionMs)
        yield* rows.insertSession({ id: randomUUID(), hash: sha256(sessionToken), userId: login.user_id, csrf, at: iso(now), expires })
        return { session_token: sessionToken, csrf, expires_at: expires, max_age_s: Math.floor(sessionMs / 1000) } satisfies PortalSessionOpened
      }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** The live session a cookie value names: none when unknown, revoked or expired. */
    const session = spanned(
      "Portal.session",
      Effect.fnUntraced(function*(sessionToken: string | undefined) {
        if (!sessionToken || !sessionToken.startsWith("sps_") || sessionToken.length > 200) return Option.none<PortalSession>()
        const row = yield* rows.session(sha256(sessionToken))
        if (row === undefined || row.revoked_at !== null) return Option.none<PortalSession>()
        if (row.expires_at <= iso(yield* Clock.currentTimeMillis)) return Option.none<PortalSession>()
        return Option.some<PortalSession>({
          session_id: row.id,
          user_id: row.user_id,
          csrf: row.csrf,
          expires_at: row.expires_at,
          approval_id: row.approval_id
        })
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** Does a submitted CSRF token match the session's (constant-time)? */
    const csrfMatches = (s: PortalSession, submitted: string | undefined | null) => {
      if (typeof submitted !== "string" || submitted.length !== s.csrf.length) return false
      return timingSafeEqual(Buffer.from(submitted), Buffer.from(s.csrf))
    }

    /** Log one session out. */
    const logout = spanned(
      "Portal.logout",
      Effect.fnUntraced(function*(sessionId: string) {
        yield* rows.endSession({ id: sessionId, at: yield* nowMs })
      }, Effect.catchTag("SqlError", Effect.die))
    )

    /** `sophia portal --logout-all`: every live session ends now; returns how many. */
    const logoutAll = spanned(
      "Portal.logoutAll",
      Effect.fnUntraced(function*() {
        return (yield* rows.endSessions({ at: yield* nowMs })).length
      }, Effect.catchTag("SqlError", Effect.die))
    )

    return {
      callerFor,
      connectionOf,
      mintLogin,
      redeem,
      mintApproveLink,
      redeemApproveLink,
      session,
      csrfMatches,
      logout,
      logoutAll
    } as const
  })
}) {}
