import { SqlClient, SqlSchema } from "@effect/sql"
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
import { DbInt, nowIso } from "../domain/Time.js"
import { serialize } from "./Dialect.js"
import { Events } from "./Events.js"
import { makeFixedStatements, perCount } from "./Statements.js"

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
    const fixed = yield* makeFixedStatements

    const selectConnections = sql`SELECT c.id, c.user_id, u.name AS user_name, c.name, c.profile, c.entity_scope,
      c.created_at, c.revoked_at, c.last_seen_at FROM connections c JOIN users u ON u.id = c.user_id`

    // every request of every transport looks its bearer up: one fixed statement
    const byHash = fixed((hash: string) =>
      sql`SELECT c.id, c.user_id, u.name AS user_name, c.name, c.profile, c.entity_scope, c.created_at,
        c.revoked_at, c.last_seen_at FROM connections c JOIN users u ON u.id = c.user_id
        WHERE c.token_hash = ${hash} AND c.revoked_at IS NULL`)
    const findById = SqlSchema.findOne({
      Request: Schema.String,
      Result: ConnectionRow,
      execute: (id) =>
        sql`SELECT c.id, c.user_id, u.name AS user_name, c.name, c.profile, c.entity_scope, c.created_at,
          c.revoked_at, c.last_seen_at FROM connections c JOIN users u ON u.id = c.user_id WHERE c.id = ${id}`
    })
    const listRows = SqlSchema.findAll({
      Request: Schema.NullOr(Schema.String),
      Result: ConnectionRow,
      execute: (userName) =>
        userName === null
          ? sql`${selectConnections} ORDER BY u.name, c.created_at, c.id`
          : sql`${selectConnections} WHERE u.name = ${userName} ORDER BY c.created_at, c.id`
    })
    const liveRowsOfUser = SqlSchema.findAll({
      Request: Schema.String,
      Result: ConnectionRow,
      execute: (userId) => sql`${selectConnections} WHERE c.user_id = ${userId} AND c.revoked_at IS NULL`
    })

    // the live name joins run on every inbox page (up to two ids a post): fixed per count of ids, up to a
    // page's worth
    const rawRowsByIds = perCount<RawConnectionRow>(
      fixed,
      64,
      (...ids) => sql`${selectConnections} WHERE ${sql.in("c.id", ids)}`
    )
    // the names alone, for the rows that show who wrote them (an inbox page): no user row joined, two columns
    const nameRowsByIds = perCount<{ readonly id: string; readonly name: string }>(
      fixed,
      64,
      (...ids) => sql`SELECT id, name FROM connections WHERE ${sql.in("id", ids)}`
    )
    const decodeNameRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String })))
    const findUserId = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ id: Schema.String }),
      execute: (name) => sql`SELECT id FROM users WHERE name = ${name}`
    })
    const userIdByName = (name: string) => Effect.map(findUserId(name), Option.map((r) => r.id))
    /** a live connection of the user holding `name`, other than `except` */
    const findClash = SqlSchema.findAll({
      Request: Schema.Struct({ userId: Schema.String, name: Schema.String, except: Schema.String }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: ({ except, name, userId }) =>
        sql`SELECT id FROM connections WHERE user_id = ${userId} AND name = ${name} AND revoked_at IS NULL AND id <> ${except}`
    })
    const countUsers = SqlSchema.single({
      Request: Schema.Void,
      Result: Schema.Struct({ n: DbInt }),
      execute: () => sql`SELECT COUNT(*) AS n FROM users`
    })

    const ensureUser = (name: string, isOwner: boolean) =>
      Effect.gen(function*() {
        // find-or-create by name: concurrent writers (two daemons creating the same user) go one at a time
        // (advisory lock, Dialect.ts), so the loser finds the winner's row instead of hitting users.name UNIQUE
        yield* serialize(sql, `users/${name}`)
        const existing = yield* userIdByName(name)
        if (Option.isSome(existing)) return existing.value
        const id = randomUUID()
        yield* sql`INSERT INTO users (id, name, is_owner, created_at) VALUES (${id}, ${name}, ${isOwner ? 1 : 0}, ${yield* nowIso})`
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
        // the name-clash check and the insert are one decision per user: serialized (advisory lock, Dialect.ts),
        // so two daemons minting the same name give one connection and one ValidationError, never a
        // unique-index violation (connections_live_name stays the backstop)
        yield* serialize(sql, `connection-names/${input.userId}`)
        const clash = yield* findClash({ userId: input.userId, name, except: "" })
        if (clash.length > 0) {
          return yield* new ValidationError({ detail: `a live connection named ${JSON.stringify(name)} already exists` })
        }
        const id = randomUUID()
        const bearer = mintBearer()
        yield* sql`INSERT INTO connections (id, user_id, name, profile, entity_scope, token_hash, created_at)
          VALUES (${id}, ${input.userId}, ${name}, ${input.profile}, ${JSON.stringify(input.scope)},
                  ${hashBearer(bearer)}, ${yield* nowIso})`
        return { connection_id: id, name, profile: input.profile, user_id: input.userId, bearer } satisfies MintedConnection
      })

    /** Mint a connection for a user (created if new; the owner when none is named). The bearer is returned once. */
    const createConnection = Effect.fn("Auth.createConnection")(function*(input: {
      readonly name: string
      readonly profile: Profile
      readonly user?: string | undefined
      readonly scope?: ReadonlyArray<string> | undefined
    }) {
      const userName = input.user ?? OWNER
      const userId = yield* ensureUser(userName, userName === OWNER)
      return yield* insertConnection({ userId, name: input.name, profile: input.profile, scope: input.scope ?? [] })
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))

    /**
     * First start on an empty database: the owner user and a first `full` connection. Returns the minted
     * connection (bearer included, to print once), or none when the database already had users.
     */
    const bootstrapOwner = Effect.fn("Auth.bootstrapOwner")(function*() {
      // daemons started together on an empty database: one bootstraps, the others then count its user
      yield* serialize(sql, "bootstrap-owner")
      const users = yield* countUsers(undefined)
      if (users.n > 0) return Option.none<MintedConnection>()
      const userId = yield* ensureUser(OWNER, true)
      return Option.some(yield* insertConnection({ userId, name: "owner", profile: "full", scope: [] }))
    }, sql.withTransaction, Effect.orDie)

    const list = Effect.fn("Auth.list")(function*(user?: string) {
      return (yield* listRows(user ?? null)).map(toInfo)
    }, Effect.orDie)

    /**
     * Resolve a selector — a full connection id, its 8-character short id, or its name — among the
     * user's live connections. Never matches another user's connection.
     */
    const resolve = Effect.fnUntraced(function*(userId: string, selector: string) {
      const rows = yield* Effect.orDie(liveRowsOfUser(userId))
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
        const userId = yield* userIdByName(user ?? OWNER).pipe(Effect.orDie)
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
    const revoke = Effect.fn("Auth.revoke")(function*(selector: string, user?: string) {
      const target = yield* resolveForCli(selector, user)
      const now = yield* nowIso
      const revoked = yield* sql`UPDATE connections SET revoked_at = ${now}
        WHERE id = ${target.connection_id} AND revoked_at IS NULL RETURNING id`
      if (revoked.length > 0) {
        yield* events.publish(new ConnectionRevoked({ user_id: target.user_id, connection_id: target.connection_id, at: now }))
      }
      return toInfo(Option.getOrThrow(yield* findById(target.connection_id)))
    }, events.transaction, Effect.catchTag("SqlError", "ParseError", Effect.die))

    const rename = Effect.fn("Auth.rename")(function*(selector: string, newName: string, user?: string) {
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
      yield* sql`UPDATE connections SET name = ${name} WHERE id = ${target.connection_id}`
      return toInfo(Option.getOrThrow(yield* findById(target.connection_id)))
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))

    // What was last made from a connection's row — the Caller of each bearer, the ConnectionInfo of each
    // connection (the live name joins of inbox pages, waits, claims…) — handed out again while the row is
    // unchanged: its identity columns for a Caller, every column for an info. The rows themselves are read
    // on every request and every join all the same (a revoked or renamed connection is seen on the next
    // one); what is saved is decoding a row through its Schema, which costs more than the statement.
    const callerOf = rowMemo(sameIdentity, toCaller)
    const infoOf = rowMemo(sameRow, toInfo)
    const touchSeen = (id: string, now: number) =>
      Effect.orDie(sql`UPDATE connections SET last_seen_at = ${new Date(now).toISOString()} WHERE id = ${id}`)

    /** Check a bearer against its row, on every call. Missing, malformed, unknown or revoked: `Unauthenticated`. */
    const authenticate = (bearer: string | undefined | null): Effect.Effect<Caller, Unauthenticated> => {
      if (!bearer || !bearer.startsWith(BEARER_PREFIX) || bearer.length > 200) return Effect.fail(new Unauthenticated())
      const hash = hashBearer(bearer)
      return Effect.flatMap(Effect.orDie(byHash(hash)), (rows) => {
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
      yield* sql`UPDATE connections SET last_seen_at = ${yield* nowIso} WHERE id = ${connectionId}`
    }, Effect.orDie)

    /** Look a connection up by id, revoked or not (for live name joins outside SQL). */
    const get = Effect.fnUntraced(function*(connectionId: string) {
      return Option.map(yield* findById(connectionId), toInfo)
    }, Effect.orDie)

    /**
     * Several connections by id, revoked or not, in one statement: how other services join names live
     * (a rename relabels past rows) without reading this service's tables.
     */
    const connections = (ids: Iterable<string>): Effect.Effect<ReadonlyMap<string, ConnectionInfo>> => {
      const unique = [...new Set(ids)]
      if (unique.length === 0) return Effect.succeed(new Map())
      return rawRowsByIds(...unique).pipe(
        Effect.orDie,
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
      return nameRowsByIds(...unique).pipe(
        Effect.flatMap(decodeNameRows),
        Effect.orDie,
        Effect.map((rows) => new Map(rows.map((r) => [r.id, r.name] as const)))
      )
    }

    /**
     * The access rules of DESIGN "Profiles and access", the one function every tool call passes
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
