import { Effect, Either, Option } from "effect"
import type { Caller, ConnectionInfo } from "../../domain/Auth.js"
import { Unauthenticated } from "../../domain/Errors.js"
import { nowIso } from "../../domain/Time.js"
import type { RawConnectionRow } from "./Rows.js"
import {
  BEARER_PREFIX,
  decodeNameRows,
  hashBearer,
  LAST_SEEN_RESOLUTION_MS,
  rowMemo,
  sameIdentity,
  sameRow,
  toCaller,
  toInfo
} from "./Rows.js"
import { spanned } from "../Spans.js"
import type { AuthStore } from "./Store.js"

/** Bearers checked on every call, and connections looked up by id (the live name joins of other services). */
export const makeLookups = (store: AuthStore) => {
  const { byHash, seenAt, findById, rawRowsByIds, nameRowsByIds, liveRowsOfUser } = store
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

  /** The user's connections that are not revoked (silent ones included), in the order they were minted. */
  const liveOf = spanned("Auth.liveOf", (userId: string): Effect.Effect<ReadonlyArray<ConnectionInfo>> =>
    liveRowsOfUser(userId).pipe(
      Effect.map((rows) => rows.map(toInfo)),
      Effect.catchTag("SqlError", "ParseError", Effect.die)
    ))

  return { authenticate, touch, get, connections, names, liveOf } as const
}
