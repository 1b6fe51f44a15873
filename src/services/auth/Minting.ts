import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Profile } from "../../domain/Auth.js"
import { ConnectionName } from "../../domain/Auth.js"
import { ValidationError } from "../../domain/Errors.js"
import { ConnectionCreated } from "../../domain/Events.js"
import { nowIso } from "../../domain/Time.js"
import { Events } from "../Events.js"
import { serialize } from "../store/Locking.js"
import type { MintedConnection } from "./Rows.js"
import { hashBearer, mintBearer } from "./Rows.js"
import type { AuthStore } from "./Store.js"

export const decodeName = Schema.decodeUnknown(ConnectionName)

/** Finding or creating a user by name, and minting a connection for it (its bearer returned once). */
export const makeMinting = (store: AuthStore) => Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const events = yield* Events
  const { userIdByName, insertUser, findClash, insertConnectionRow } = store

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
    /** its client's elicitation answer may approve its plain writes */
    readonly allowElicitation: boolean
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
        at: yield* nowIso,
        allowElicitation: input.allowElicitation ? 1 : 0
      })
      return { connection_id: id, name, profile: input.profile, user_id: input.userId, bearer } satisfies MintedConnection
    })

  /**
   * A connection minted and announced inside the minting transaction: `ConnectionCreated`'s subscribers
   * (Coordination: where it starts reading, caught up unless `backlog`) commit or roll back with it.
   */
  const mint = (input: Parameters<typeof insertConnection>[0], backlog: boolean) =>
    Effect.tap(insertConnection(input), (minted) =>
      Effect.flatMap(nowIso, (at) =>
        events.publish(new ConnectionCreated({ user_id: minted.user_id, connection_id: minted.connection_id, backlog, at }))))

  return { ensureUser, mint } as const
})
