import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { makeStatements } from "../store/Statements.js"
import type { RawConnectionRow } from "./Rows.js"
import { decodeConnectionRows, decodeIds, IDS_MAX } from "./Rows.js"

/**
 * Every statement on Auth's tables (users, connections), named and bound by name, and the small reads made
 * of them. Only Auth's modules use it.
 */
export const makeAuthStore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, namedValues, shaped } = yield* makeStatements

  const selectConnections = sql`SELECT c.id, c.user_id, u.name AS user_name, c.name, c.profile, c.entity_scope,
    c.created_at, c.revoked_at, c.last_seen_at, c.allow_elicitation FROM connections c JOIN users u ON u.id = c.user_id`

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
    sql`${selectConnections} WHERE c.user_id = ${p.userId} AND c.revoked_at IS NULL ORDER BY c.created_at, c.id`)
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
    allowElicitation: number
  }) =>
    sql`INSERT INTO connections (id, user_id, name, profile, entity_scope, token_hash, created_at, allow_elicitation)
      VALUES (${p.id}, ${p.userId}, ${p.name}, ${p.profile}, ${p.scope}, ${p.hash}, ${p.at}, ${p.allowElicitation})`)
  const revokeRow = named("Auth.revoke", (p: { id: string; at: string }) =>
    sql`UPDATE connections SET revoked_at = ${p.at} WHERE id = ${p.id} AND revoked_at IS NULL RETURNING id`)
  const renameRow = named("Auth.rename", (p: { id: string; name: string }) =>
    sql`UPDATE connections SET name = ${p.name} WHERE id = ${p.id}`)
  const seenAt = named("Auth.seen", (p: { id: string; at: string }) =>
    sql`UPDATE connections SET last_seen_at = ${p.at} WHERE id = ${p.id}`)

  return {
    byHash,
    findById,
    listRows,
    liveRowsOfUser,
    rawRowsByIds,
    nameRowsByIds,
    userIdByName,
    findClash,
    countUsers,
    insertUser,
    insertConnectionRow,
    revokeRow,
    renameRow,
    seenAt
  } as const
})

/** What Auth's modules share of its store. */
export type AuthStore = Effect.Effect.Success<typeof makeAuthStore>
