import { SqlClient } from "@effect/sql"
import { Clock, Effect, Either, Option, Schema } from "effect"
import type { ParseError } from "effect/ParseResult"
import * as crypto from "node:crypto"
import { randomBytes, randomUUID } from "node:crypto"
import { decideAccess } from "../domain/Access.js"
import type { AccessClass, Caller, ConnectionInfo, Profile } from "../domain/Auth.js"
import { ConnectionId, ConnectionName, connectionShort, UserId } from "../domain/Auth.js"
import {
  AmbiguousRecipient,
  ForbiddenProfile,
  NotFound,
  Unauthenticated,
  UnknownRecipient,
  ValidationError
} from "../domain/Errors.js"
import { ConnectionRevoked } from "../domain/Events.js"
import { nowIso } from "../domain/Time.js"
import { Events } from "./Events.js"
import { spanned } from "./Spans.js"
import { serialize } from "./store/Locking.js"
import { makeStatements } from "./store/Statements.js"

/** Bearers are `sph_` + 32 random bytes (base64url); only their SHA-256 is stored. */
const BEARER_PREFIX = "sph_"
const BEARER_BYTES = 32
export const hashBearer: (bearer: string) => string = typeof crypto.hash === "function"
  // Node's one-shot hash where it exists (20.12+): no Hash object per request
  ? (bearer) => crypto.hash("sha256", bearer, "hex")
  : (bearer) => crypto.createHash("sha256").update(bearer).digest("hex")
const mintBearer = () => BEARER_PREFIX + randomBytes(BEARER_BYTES).toString("base64url")

/** last_seen_at is written at most this often by ordinary calls (a write per call would be waste). */
const LAST_SEEN_RESOLUTION_MS = 30_000

const ConnectionRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  user_name: Schema.String,
  name: Schema.String,
  profile: Schema.Literal("observer", "assistant", "full"),
  entity_scope: Schema.parseJson(Schema.Array(Schema.String)),
  created_at: Schema.String,
  revoked_at: Schema.NullOr(Schema.String),
  last_seen_at: Schema.NullOr(Schema.String)
})
type ConnectionRow = typeof ConnectionRow.Type

/** A connection row as the store returns it (before decoding). */
type RawConnectionRow = { readonly [K in keyof typeof ConnectionRow.Encoded]: typeof ConnectionRow.Encoded[K] }

/** The columns a Caller is made of (everything but the timestamps). */
const sameIdentity = (a: RawConnectionRow, b: RawConnectionRow) =>
  a.id === b.id && a.user_id === b.user_id && a.user_name === b.user_name && a.name === b.name &&
  a.profile === b.profile && a.entity_scope === b.entity_scope

/** Every column (a ConnectionInfo carries the timestamps too). */
const sameRow = (a: RawConnectionRow, b: RawConnectionRow) =>
  sameIdentity(a, b) && a.created_at === b.created_at && a.revoked_at === b.revoked_at && a.last_seen_at === b.last_seen_at

const decodeConnectionRow = Schema.decodeUnknownEither(ConnectionRow)
const decodeConnectionRows = Schema.decodeUnknown(Schema.Array(ConnectionRow))
const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))
const decodeNameRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String })))

/** An id list bound by one statement of its length, up to a page's worth (an inbox page: two ids a post). */
const IDS_MAX = 64

/**
 * A memo of what `make` gives for a connection row, by key, reused while `same` says the row is unchanged
 * (a changed or new row is decoded and made again). Bounded: past 4096 keys it starts afresh.
 */
const rowMemo = <A>(same: (a: RawConnectionRow, b: RawConnectionRow) => boolean, make: (row: ConnectionRow) => A) => {
  const memo = new Map<string, { readonly row: RawConnectionRow; readonly value: A }>()
  return (key: string, row: RawConnectionRow): Either.Either<A, ParseError> => {
    const known = memo.get(key)
    if (known !== undefined && same(known.row, row)) return Either.right(known.value)
    return Either.map(decodeConnectionRow(row), (decoded) => {
      const value = make(decoded)
      if (memo.size >= 4096) memo.clear()
      memo.set(key, { row, value })
      return value
    })
  }
}

const toInfo = (row: ConnectionRow): ConnectionInfo => ({
  connection_id: row.id,
  connection_short: connectionShort(row.id),
  name: row.name,
  profile: row.profile,
  user_id: row.user_id,
  user_name: row.user_name,
  entity_scope: row.entity_scope,
  created_at: row.created_at,
  revoked_at: row.revoked_at,
  last_seen_at: row.last_seen_at
})

const toCaller = (row: ConnectionRow): Caller => ({
  userId: UserId.make(row.user_id),
  connectionId: ConnectionId.make(row.id),
  connectionShort: connectionShort(row.id),
  name: row.name,
  profile: row.profile,
  entityScope: row.entity_scope
})

export interface MintedConnection {
  readonly connection_id: string
  readonly name: string
  readonly profile: Profile
  readonly user_id: string
  /** shown once; only its hash is stored */
  readonly bearer: string
}

const OWNER = "owner"
const decodeName = Schema.decodeUnknown(ConnectionName)

/**
 * Users, connections and bearers; the access rules every tool call passes through.
 * A bearer is checked against its row on every call, so a revocation bites on the very next request.
 */
export class Auth extends Effect.Service<Auth>()("sophia/Auth", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    const { named, namedValues, shaped } = yield* makeStatements

    const selectConnections = sql`SELECT c.id, c.user_id, u.name AS user_name, c.name, c.profile, c.entity_scope,
      c.created_at, c.revoked_at, c.last_seen_at FROM connections c JOIN users u ON u.id = c.user_id`

    // every request of every transport looks its bearer up: the hottest statement there is, one named statement
    const byHash = named("Auth.byBearer", (p: { hash: string }) =>
      sql`${selectConnections} WHERE c.token_hash = ${p.hash} AND c.revoked_at IS NULL`)
    const rowById = named("Auth.byId", (p: { id: string }) => sql`${selectConnections} WHERE c.id = ${p.id}`)
    const findById = (id: string) =>
      Effect.map(Effect.flatMap(rowById({ id }), decodeConnectionRows), (rows) => Option.fromNullable(rows[0]))
    const allRows = named("Auth.list", () => sql`${selectConnections} ORDER BY u.name, c.created_at, c.id`)
    const rowsOfUserName = named("Auth.listOfUser", (p: { userName: string }) =>
      sql`${selectConnections} WHERE u.name = ${p.userName} ORDER BY c.created_at, c.id`)
    const listRows = (userName: string | null) =>
      Effect.flatMap(userName === null ? allRows({}) : rowsOfUserName({ userName }), decodeConnectionRows)
    const liveRowsOf = named("Auth.liveOfUser", (p: { userId: string }) =>
      sql`${selectConnections} WHERE c.user_id = ${p.userId} AND c.revoked_at IS NULL`)
    const liveRowsOfUser = (userId: string) => Effect.flatMap(liveRowsOf({ userId }), decodeConnectionRows)

    // the live name joins run on every inbox page (up to two ids a post): one statement per count of ids, up
    // to a page's worth
    const rawRowsByIds = shaped("Auth.connections", IDS_MAX, (p: { ids: ReadonlyArray<string> }) =>
      sql<RawConnectionRow>`${selectConnections} WHERE ${sql.in("c.id", p.ids)}`)
    // the names alone, for the rows that show who wrote them (an inbox page): no user row joined, two columns
    const nameRowsByIds = shaped("Auth.names", IDS_MAX, (p: { ids: ReadonlyArray<string> }) =>
      sql`SELECT id, name FROM connections WHERE ${sql.in("id", p.ids)}`)
    const userIdOf = named("Auth.userIdByName", (p: { name: string }) => sql`SELECT id FROM users WHERE name = ${p.name}`)
    const userIdByName = (name: string) =>
      Effect.map(Effect.flatMap(userIdOf({ name }), decodeIds), (rows) => Option.fromNullable(rows[0]?.id))
    /** a live connection of the user holding `name`, other than `except` */
    const clashOf = named("Auth.nameClash", (p: { userId: string; name: string; except: string }) =>
      sql`SELECT id FROM connections WHERE user_id = ${p.userId} AND name = ${p.name} AND revoked_at IS NULL AND id <> ${p.except}`)
    const findClash = (p: { userId: string; name: string; except: string }) => Effect.flatMap(clashOf(p), decodeIds)
    const countUsers = namedValues("Auth.countUsers", () => sql`SELECT COUNT(*) FROM users`)
    const insertUser = named("Auth.insertUser", (p: { id: string; name: string; isOwner: number; at: string }) =>
      sql`INSERT INTO users (id, name, is_owner, created_at) VALUES (${p.id}, ${p.name}, ${p.isOwner}, ${p.at})`)
    const insertConnectionRow = named("Auth.insertConnection", (p: {
      id: string
      userId: string
      name: string
      profile: string
      scope: string
      hash: string
      at: string
    }) =>
      sql`INSERT INTO connections (id, user_id, name, profile, entity_scope, token_hash, created_at)
        VALUES (${p.id}, ${p.userId}, ${p.name}, ${p.profile}, ${p.scope}, ${p.hash}, ${p.at})`)
    const revokeRow = named("Auth.revoke", (p: { id: string; at: string }) =>
      sql`UPDATE connections SET revoked_at = ${p.at} WHERE id = ${p.id} AND revoked_at IS NULL RETURNING id`)
    const renameRow = named("Auth.rename", (p: { id: string; name: string }) =>
      sql`UPDATE connections SET name = ${p.name} WHERE id = ${p.id}`)
    const seenAt = named("Auth.seen", (p: { id: string; at: string }) =>
      sql`UPDATE connections SET last_seen_at = ${p.at} WHERE id = ${p.id}`)

    const ensureUser = (name: string, isOwner: boolean) =>
      Effect.gen(function*() {
        // find-or-create by name: concurrent writers (two daemons creating the same user) go one at a time
        // (advisory lock, store/Locking.ts), so the loser finds the winner's row instead of hitting users.name UNIQUE
        yield* serialize(sql, `users/${name}`)
        const existing = yield* userIdByName(name)
        if (Option.isSome(existing)) return existing.value
        const id = randomUUID()
        yield* insertUser({ id, name, isOwner: isOwner ? 1 : 0, at: yield* nowIso })
        return id
      })

    const insertConnection = (input: {
      readonly userId: string
      readonly name: string
      readonly profile: Profile
      readonly scope: ReadonlyArray<string>
    }) =>
      Effect.gen(function*() {
        const name = yield* decodeName(input.name).pipe(
          Effect.mapError(() => new ValidationError({ detail: `invalid connection name ${JSON.stringify(input.name)}` }))
        )
        // the name-clash check and the insert are one decision per user: serialized (advisory lock, store/Locking.ts),
        // so two daemons minting the same name give one connection and one ValidationError, never a
        // unique-index violation (connections_live_name stays the backstop)
        yield* serialize(sql, `connection-names/${input.userId}`)
        const clash = yield* findClash({ userId: input.userId, name, except: "" })
        if (clash.length > 0) {
          return yield* new ValidationError({ detail: `a live connection named ${JSON.stringify(name)} already exists` })
        }
        const id = randomUUID()
        const bearer = mintBearer()
        yield* insertConnectionRow({
          id,
          userId: input.userId,
          name,
          profile: input.profile,
          scope: JSON.stringify(input.scope),
          hash: hashBearer(bearer),
          at: yield* nowIso
        })
        return { connection_id: id, name, profile: input.profile, user_id: input.userId, bearer } satisfies MintedConnection
      })

    /** Mint a connection for a user (created if new; the owner when none is named). The bearer is returned once. */
    const createConnection = spanned("Auth.createConnection", Effect.fnUntraced(function*(input: {
      readonly name: string
      readonly profile: Profile
      readonly user?: string | undefined
      readonly scope?: ReadonlyArray<string> | undefined
    }) {
      const userName = input.user ?? OWNER
      const userId = yield* ensureUser(userName, userName === OWNER)
      return yield* insertConnection({ userId, name: input.name, profile: input.profile, scope: input.scope ?? [] })
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /**
     * First start on an empty database: the owner user and a first `full` connection. Returns the minted
     * connection (bearer included, to print once), or none when the database already had users.
     */
    const bootstrapOwner = spanned("Auth.bootstrapOwner", Effect.fnUntraced(function*() {
      // daemons started together on an empty database: one bootstraps, the others then count its user
      yield* serialize(sql, "bootstrap-owner")
      const [[users]] = yield* countUsers({})
      if (Number(users) > 0) return Option.none<MintedConnection>()
      const userId = yield* ensureUser(OWNER, true)
      return Option.some(yield* insertConnection({ userId, name: "owner", profile: "full", scope: [] }))
    }, sql.withTransaction, Effect.orDie))

    const list = spanned("Auth.list", Effect.fnUntraced(function*(user?: string) {
      return (yield* listRows(user ?? null)).map(toInfo)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /**
     * Resolve a selector — a full connection id, its 8-character short id, or its name — among the
     * user's live connections. Never matches another user's connection.
     */
    const resolve = Effect.fnUntraced(function*(userId: string, selector: string) {
      const rows = yield* liveRowsOfUser(userId).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
      const exact = rows.filter((r) => r.id === selector)
      if (exact.length === 1) return toInfo(exact[0])
      const byShortOrName = rows.filter((r) => r.name === selector || (selector.length === 8 && r.id.startsWith(selector)))
      if (byShortOrName.length === 1) return toInfo(byShortOrName[0])
      if (byShortOrName.length > 1) {
        return yield* new AmbiguousRecipient({
          selector,
          candidates: byShortOrName.map((r) => ({ connection_id: r.id, name: r.name }))
        })
      }
      return yield* new UnknownRecipient({ selector })
    })

    /** The CLI's selector: like `resolve`, but across one user (the owner unless named). */
    const resolveForCli = (selector: string, user?: string) =>
      Effect.gen(function*() {
        const userId = yield* userIdByName(user ?? OWNER).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
        if (Option.isNone(userId)) return yield* new NotFound({ what: "user", id: user ?? OWNER })
        return yield* resolve(userId.value, selector).pipe(
          Effect.catchTags({
            UnknownRecipient: () => new NotFound({ what: "connection", id: selector }),
            AmbiguousRecipient: (e) =>
              new ValidationError({ detail: `${e.message}: ${e.candidates.map((c) => c.connection_id).join(", ")}` })
          })
        )
      })

    /**
     * Revoke a connection: its bearer stops working on the next call. `ConnectionRevoked` is published
     * inside the revocation's transaction (waits on it resolve then, not at their deadline).
     */
    const revoke = spanned("Auth.revoke", Effect.fnUntraced(function*(selector: string, user?: string) {
      const target = yield* resolveForCli(selector, user)
      const now = yield* nowIso
      const revoked = yield* revokeRow({ id: target.connection_id, at: now })
      if (revoked.length > 0) {
        yield* events.publish(new ConnectionRevoked({ user_id: target.user_id, connection_id: target.connection_id, at: now }))
      }
      return toInfo(Option.getOrThrow(yield* findById(target.connection_id)))
    }, events.transaction, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    const rename = spanned("Auth.rename", Effect.fnUntraced(function*(selector: string, newName: string, user?: string) {
      const target = yield* resolveForCli(selector, user)
      const name = yield* decodeName(newName).pipe(
        Effect.mapError(() => new ValidationError({ detail: `invalid connection name ${JSON.stringify(newName)}` }))
      )
      // the same decision as minting a name (see insertConnection): serialized per user
      yield* serialize(sql, `connection-names/${target.user_id}`)
      const clash = yield* findClash({ userId: target.user_id, name, except: target.connection_id })
      if (clash.length > 0) {
        return yield* new ValidationError({ detail: `a live connection named ${JSON.stringify(name)} already exists` })
      }
      yield* renameRow({ id: target.connection_id, name })
      return toInfo(Option.getOrThrow(yield* findById(target.connection_id)))
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    // What was last made from a connection's row — the Caller of each bearer, the ConnectionInfo of each
    // connection (the live name joins of inbox pages, waits, claims…) — handed out again while the row is
    // unchanged: its identity columns for a Caller, every column for an info. The rows themselves are read
    // on every request and every join all the same (a revoked or renamed connection is seen on the next
    // one); what is saved is decoding a row through its Schema, which costs more than the statement.
    const callerOf = rowMemo(sameIdentity, toCaller)
    const infoOf = rowMemo(sameRow, toInfo)
    const touchSeen = (id: string, now: number) =>
      seenAt({ id, at: new Date(now).toISOString() }).pipe(Effect.catchTag("SqlError", Effect.die))

    /** Check a bearer against its row, on every call. Missing, malformed, unknown or revoked: `Unauthenticated`. */
    const authenticate = (bearer: string | undefined | null): Effect.Effect<Caller, Unauthenticated> => {
      if (!bearer || !bearer.startsWith(BEARER_PREFIX) || bearer.length > 200) return Effect.fail(new Unauthenticated())
      const hash = hashBearer(bearer)
      return Effect.flatMap(Effect.catchTag(byHash({ hash }), "SqlError", Effect.die), (rows) => {
        const row = rows[0] as RawConnectionRow | undefined
        if (row === undefined) return Effect.fail(new Unauthenticated())
        return Effect.clockWith((clock) => {
          const now = clock.unsafeCurrentTimeMillis()
          const seen = row.last_seen_at ? Date.parse(row.last_seen_at) : 0
          const made = callerOf(hash, row)
          if (Either.isLeft(made)) return Effect.die(made.left)
          const caller = Effect.succeed(made.right)
          return now - seen >= LAST_SEEN_RESOLUTION_MS ? Effect.zipLeft(caller, touchSeen(row.id, now)) : caller
        })
      })
    }

    /** Record that a connection is alive now (beacon). */
    const touch = Effect.fnUntraced(function*(connectionId: string) {
      yield* seenAt({ id: connectionId, at: yield* nowIso })
    }, Effect.catchTag("SqlError", Effect.die))

    /** Look a connection up by id, revoked or not (for live name joins outside SQL). */
    const get = Effect.fnUntraced(function*(connectionId: string) {
      return Option.map(yield* findById(connectionId), toInfo)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))

    /**
     * Several connections by id, revoked or not, in one statement: how other services join names live
     * (a rename relabels past rows) without reading this service's tables.
     */
    const connections = (ids: Iterable<string>): Effect.Effect<ReadonlyMap<string, ConnectionInfo>> => {
      const unique = [...new Set(ids)]
      if (unique.length === 0) return Effect.succeed(new Map())
      return rawRowsByIds({ ids: unique }).pipe(
        Effect.catchTag("SqlError", Effect.die),
        Effect.flatMap((rows) => {
          const found = new Map<string, ConnectionInfo>()
          for (const row of rows) {
            const info = infoOf(row.id, row)
            if (Either.isLeft(info)) return Effect.die(info.left)
            found.set(info.right.connection_id, info.right)
          }
          return Effect.succeed(found)
        })
      )
    }

    /**
     * The names of several connections by id, revoked or not, in one statement: `connections` for a caller
     * that shows only who wrote a row (an inbox page joins two names a post, live).
     */
    const names = (ids: Iterable<string>): Effect.Effect<ReadonlyMap<string, string>> => {
      const unique = [...new Set(ids)]
      if (unique.length === 0) return Effect.succeed(new Map())
      return nameRowsByIds({ ids: unique }).pipe(
        Effect.flatMap(decodeNameRows),
        Effect.catchTag("SqlError", "ParseError", Effect.die),
        Effect.map((rows) => new Map(rows.map((r) => [r.id, r.name] as const)))
      )
    }

    /**
     * The access rules (the profiles-and-access table, domain/Access.ts), the one function every tool call passes
     * through. A forbidden class is refused here; a call that needs an approval ("approval" for an
     * assistant's write, "owner_approval" for any elevated tool) is handed to the Approvals flow by the
     * dispatcher, which binds a pending approval to the exact arguments and waits for the decision.
     */
    const authorize = (
      caller: Caller,
      tool: { readonly name: string; readonly access: AccessClass }
    ): Effect.Effect<"allow" | "approval" | "owner_approval", ForbiddenProfile> => {
      const decision = decideAccess(caller.profile, tool.access)
      return decision === "forbidden"
        ? Effect.fail(new ForbiddenProfile({ tool: tool.name, profile: caller.profile, access: tool.access }))
        : Effect.succeed(decision)
    }

    return {
      createConnection,
      bootstrapOwner,
      list,
      resolve,
      revoke,
      rename,
      authenticate,
      touch,
      get,
      connections,
      names,
      authorize
    } as const
  })
}) {}
