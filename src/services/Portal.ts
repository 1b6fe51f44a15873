import { SqlClient, SqlSchema } from "@effect/sql"
import { Clock, Config, Effect, Option, Schema } from "effect"
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto"
import type { Caller } from "../domain/Auth.js"
import { ConnectionId, connectionShort, UserId } from "../domain/Auth.js"
import type { PortalLogin, PortalSession, PortalSessionOpened } from "../domain/Portal.js"
import { DEFAULT_SESSION_HOURS, LOGIN_LINK_TTL_MS, PortalLoginRefused } from "../domain/Portal.js"
import { Auth } from "./Auth.js"

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")
const mint = (prefix: string) => prefix + randomBytes(32).toString("base64url")
const iso = (ms: number) => new Date(ms).toISOString()

/** The portal's connection row is named this (or `portal-2`, … when an agent already holds the name). */
const PORTAL_CONNECTION_NAME = "portal"

const LoginRow = Schema.Struct({
  token_hash: Schema.String,
  user_id: Schema.String,
  expires_at: Schema.String,
  used_at: Schema.NullOr(Schema.String)
})
const SessionRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  csrf: Schema.String,
  expires_at: Schema.String,
  revoked_at: Schema.NullOr(Schema.String)
})

/**
 * The owner's browser sessions: one-time login links, sessions (revocable, expiring), CSRF tokens, and
 * the connection the portal acts as. The portal's caller has the `portal` profile (no elevated gate), and
 * its connection is a real row owned by the owner — what it writes is journaled as the owner's portal.
 * That row is a `full` connection whose bearer nobody ever sees (minted and dropped): only a portal
 * session can act as it.
 */
export class Portal extends Effect.Service<Portal>()("sophia/Portal", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const sessionHours = yield* Config.number("SOPHIA_PORTAL_SESSION_HOURS").pipe(
      Config.withDefault(DEFAULT_SESSION_HOURS),
      Effect.orDie
    )
    const sessionMs = Math.max(1, Math.round(sessionHours * 3_600_000))

    const findLogin = SqlSchema.findOne({
      Request: Schema.String,
      Result: LoginRow,
      execute: (hash) => sql`SELECT token_hash, user_id, expires_at, used_at FROM portal_logins WHERE token_hash = ${hash}`
    })
    const findSession = SqlSchema.findOne({
      Request: Schema.String,
      Result: SessionRow,
      execute: (hash) => sql`SELECT id, user_id, csrf, expires_at, revoked_at FROM portal_sessions WHERE token_hash = ${hash}`
    })
    const findIdentity = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ connection_id: Schema.String }),
      execute: (userId) => sql`SELECT connection_id FROM portal_identity WHERE user_id = ${userId}`
    })

    /** The owner's portal connection: the recorded one while it is live, else a new row (recorded). */
    const identity = (userId?: string) =>
      Effect.gen(function*() {
        if (userId !== undefined) {
          const known = yield* findIdentity(userId)
          if (Option.isSome(known)) {
            const info = yield* auth.get(known.value.connection_id)
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
            yield* sql`INSERT INTO portal_identity (user_id, connection_id) VALUES (${m.user_id}, ${m.connection_id})
              ON CONFLICT (user_id) DO UPDATE SET connection_id = ${m.connection_id}`
            return Option.getOrThrow(yield* auth.get(m.connection_id))
          }
          attempt++
        }
      })

    /** The caller the portal acts as for a session's user: the portal connection with the `portal` profile. */
    const callerFor = Effect.fn("Portal.caller")(function*(userId?: string) {
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

    /** The connection id the portal acts as for this user, if it has one (the Fleet page marks it). */
    const connectionOf = (userId: string) =>
      Effect.map(findIdentity(userId), Option.map((r) => r.connection_id)).pipe(Effect.orDie)

    /** A one-time login link for the owner: valid `LOGIN_LINK_TTL_MS`, for one use. */
    const mintLogin = Effect.fn("Portal.mintLogin")(function*() {
      const info = yield* identity((yield* ownerId()) ?? undefined)
      const now = yield* Clock.currentTimeMillis
      const token = mint("spl_")
      const expires = iso(now + LOGIN_LINK_TTL_MS)
      yield* sql`INSERT INTO portal_logins (token_hash, user_id, created_at, expires_at)
        VALUES (${sha256(token)}, ${info.user_id}, ${iso(now)}, ${expires})`
      return { token, expires_at: expires } satisfies PortalLogin
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))

    const ownerId = () =>
      Effect.map(identityOwner, (rows) => rows[0]?.user_id ?? null)
    const identityOwner = sql<{ user_id: string }>`SELECT user_id FROM portal_identity ORDER BY user_id LIMIT 1`

    /**
     * Redeem a login link: the conditional update wins it once; the session it opens is returned with its
     * cookie value and CSRF token (both shown once; the cookie is stored as a hash).
     */
    const redeem = Effect.fn("Portal.redeem")(function*(token: string) {
      const now = yield* Clock.currentTimeMillis
      const hash = sha256(token)
      const login = yield* findLogin(hash)
      if (Option.isNone(login)) return yield* new PortalLoginRefused({ reason: "unknown" })
      if (login.value.used_at !== null) return yield* new PortalLoginRefused({ reason: "used" })
      if (login.value.expires_at <= iso(now)) return yield* new PortalLoginRefused({ reason: "expired" })
      const won = yield* sql`UPDATE portal_logins SET used_at = ${iso(now)}
        WHERE token_hash = ${hash} AND used_at IS NULL RETURNING token_hash`
      if (won.length === 0) return yield* new PortalLoginRefused({ reason: "used" })
      const sessionToken = mint("sps_")
      const csrf = randomBytes(32).toString("base64url")
      const expires = iso(now + sessionMs)
      yield* sql`INSERT INTO portal_sessions (id, token_hash, user_id, csrf, created_at, expires_at)
        VALUES (${randomUUID()}, ${sha256(sessionToken)}, ${login.value.user_id}, ${csrf}, ${iso(now)}, ${expires})`
      return {
        session_token: sessionToken,
        csrf,
        expires_at: expires,
        max_age_s: Math.floor(sessionMs / 1000)
      } satisfies PortalSessionOpened
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))

    /** The live session a cookie value names: none when unknown, revoked or expired. */
    const session = Effect.fn("Portal.session")(function*(sessionToken: string | undefined) {
      if (!sessionToken || !sessionToken.startsWith("sps_") || sessionToken.length > 200) return Option.none<PortalSession>()
      const row = yield* findSession(sha256(sessionToken))
      if (Option.isNone(row) || row.value.revoked_at !== null) return Option.none<PortalSession>()
      if (row.value.expires_at <= iso(yield* Clock.currentTimeMillis)) return Option.none<PortalSession>()
      return Option.some<PortalSession>({
        session_id: row.value.id,
        user_id: row.value.user_id,
        csrf: row.value.csrf,
        expires_at: row.value.expires_at
      })
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))

    /** Does a submitted CSRF token match the session's (constant-time)? */
    const csrfMatches = (s: PortalSession, submitted: string | undefined | null) => {
      if (typeof submitted !== "string" || submitted.length !== s.csrf.length) return false
      return timingSafeEqual(Buffer.from(submitted), Buffer.from(s.csrf))
    }

    /** Log one session out. */
    const logout = Effect.fn("Portal.logout")(function*(sessionId: string) {
      yield* sql`UPDATE portal_sessions SET revoked_at = ${yield* nowMs} WHERE id = ${sessionId} AND revoked_at IS NULL`
    }, Effect.orDie)

    /** `sophia portal --logout-all`: every live session ends now; returns how many. */
    const logoutAll = Effect.fn("Portal.logoutAll")(function*() {
      const now = yield* nowMs
      const rows = yield* sql`UPDATE portal_sessions SET revoked_at = ${now}
        WHERE revoked_at IS NULL AND expires_at > ${now} RETURNING id`
      return rows.length
    }, Effect.orDie)

    const nowMs = Effect.map(Clock.currentTimeMillis, iso)

    return { callerFor, connectionOf, mintLogin, redeem, session, csrfMatches, logout, logoutAll } as const
  })
}) {}
