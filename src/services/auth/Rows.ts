import { Either, Schema } from "effect"
import type { ParseError } from "effect/ParseResult"
import * as crypto from "node:crypto"
import { randomBytes } from "node:crypto"
import type { Caller, ConnectionInfo, Profile } from "../../domain/Auth.js"
import { ConnectionId, connectionShort, UserId } from "../../domain/Auth.js"

/** Bearers are `sph_` + 32 random bytes (base64url); only their SHA-256 is stored. */
export const BEARER_PREFIX = "sph_"
const BEARER_BYTES = 32
export const hashBearer: (bearer: string) => string = typeof crypto.hash === "function"
  // Node's one-shot hash where it exists (20.12+): no Hash object per request
  ? (bearer) => crypto.hash("sha256", bearer, "hex")
  : (bearer) => crypto.createHash("sha256").update(bearer).digest("hex")
export const mintBearer = () => BEARER_PREFIX + randomBytes(BEARER_BYTES).toString("base64url")

/** last_seen_at is written at most this often by ordinary calls (a write per call would be waste). */
export const LAST_SEEN_RESOLUTION_MS = 30_000

export const ConnectionRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  user_name: Schema.String,
  name: Schema.String,
  profile: Schema.Literal("observer", "assistant", "full"),
  entity_scope: Schema.parseJson(Schema.Array(Schema.String)),
  created_at: Schema.String,
  revoked_at: Schema.NullOr(Schema.String),
  last_seen_at: Schema.NullOr(Schema.String),
  /** 1: the owner allowed this connection's client to approve its plain writes by elicitation */
  allow_elicitation: Schema.transform(Schema.Number, Schema.Boolean, {
    strict: true,
    decode: (n) => n !== 0,
    encode: (allowed) => (allowed ? 1 : 0)
  })
})
export type ConnectionRow = typeof ConnectionRow.Type

/** A connection row as the store returns it (before decoding). */
export type RawConnectionRow = { readonly [K in keyof typeof ConnectionRow.Encoded]: typeof ConnectionRow.Encoded[K] }

/** The columns a Caller is made of (everything but the timestamps). */
export const sameIdentity = (a: RawConnectionRow, b: RawConnectionRow) =>
  a.id === b.id && a.user_id === b.user_id && a.user_name === b.user_name && a.name === b.name &&
  a.profile === b.profile && a.entity_scope === b.entity_scope && a.allow_elicitation === b.allow_elicitation

/** Every column (a ConnectionInfo carries the timestamps too). */
export const sameRow = (a: RawConnectionRow, b: RawConnectionRow) =>
  sameIdentity(a, b) && a.created_at === b.created_at && a.revoked_at === b.revoked_at && a.last_seen_at === b.last_seen_at

const decodeConnectionRow = Schema.decodeUnknownEither(ConnectionRow)
export const decodeConnectionRows = Schema.decodeUnknown(Schema.Array(ConnectionRow))
export const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))
export const decodeNameRows = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String })))

/** An id list bound by one statement of its length, up to a page's worth (an inbox page: two ids a post). */
export const IDS_MAX = 64

/**
 * A memo of what `make` gives for a connection row, by key, reused while `same` says the row is unchanged
 * (a changed or new row is decoded and made again). Bounded: past 4096 keys it starts afresh.
 */
export const rowMemo = <A>(same: (a: RawConnectionRow, b: RawConnectionRow) => boolean, make: (row: ConnectionRow) => A) => {
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

export const toInfo = (row: ConnectionRow): ConnectionInfo => ({
  connection_id: row.id,
  connection_short: connectionShort(row.id),
  name: row.name,
  profile: row.profile,
  user_id: row.user_id,
  user_name: row.user_name,
  entity_scope: row.entity_scope,
  created_at: row.created_at,
  revoked_at: row.revoked_at,
  last_seen_at: row.last_seen_at,
  allow_elicitation: row.allow_elicitation
})

export const toCaller = (row: ConnectionRow): Caller => ({
  userId: UserId.make(row.user_id),
  connectionId: ConnectionId.make(row.id),
  connectionShort: connectionShort(row.id),
  name: row.name,
  profile: row.profile,
  entityScope: row.entity_scope,
  allowElicitation: row.allow_elicitation
})

export interface MintedConnection {
  readonly connection_id: string
  readonly name: string
  readonly profile: Profile
  readonly user_id: string
  /** shown once; only its hash is stored */
  readonly bearer: string
}

