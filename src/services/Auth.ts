import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { decideAccess } from "../domain/Access.js"
import type { AccessClass, Caller, Profile } from "../domain/Auth.js"
import { AmbiguousRecipient, ForbiddenProfile, NotFound, UnknownRecipient, ValidationError } from "../domain/Errors.js"
import { ConnectionRevoked } from "../domain/Events.js"
import { nowIso } from "../domain/Time.js"
import { makeLookups } from "./auth/Lookups.js"
import { decodeName, makeMinting } from "./auth/Minting.js"
import type { MintedConnection } from "./auth/Rows.js"
import { toInfo } from "./auth/Rows.js"
import { makeSilence } from "./auth/Silence.js"
import { makeAuthStore } from "./auth/Store.js"
import { Events } from "./Events.js"
import { spanned } from "./Spans.js"
import { serialize } from "./store/Locking.js"

export type { MintedConnection } from "./auth/Rows.js"
export { hashBearer } from "./auth/Rows.js"

const OWNER = "owner"

/**
 * Users, connections and bearers; the access rules every tool call passes through.
 * A bearer is checked against its row on every call, so a revocation bites on the very next request.
 */
export class Auth extends Effect.Service<Auth>()("sophia/Auth", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events

    const store = yield* makeAuthStore
    const { countUsers, listRows, liveRowsOfUser, userIdByName, findClash, revokeRow, renameRow, findById } = store
    const { ensureUser, mint } = yield* makeMinting(store)
    const { authenticate, touch, get, connections, names, liveOf } = makeLookups(store)
    const { noticeSilence } = yield* makeSilence(events)

    /**
     * Mint a connection for a user (created if new; the owner when none is named). The bearer is returned
     * once. It starts caught up — the user's posts so far are not unread for it, posts after (and every post
     * targeted at it) are — unless `backlog` is true: then the whole history is unread for it. Its client's
     * answer to elicitation approves its plain writes only with `allowElicitation` (the owner's allowance,
     * off by default: the owner decides each one); elevated tools always need the owner.
     */
    const createConnection = spanned("Auth.createConnection", Effect.fnUntraced(function*(input: {
      readonly name: string
      readonly profile: Profile
      readonly user?: string | undefined
      readonly scope?: ReadonlyArray<string> | undefined
      /** start with the history unread (default false: start caught up) */
      readonly backlog?: boolean | undefined
      /** its MCP client's elicitation answer may approve its plain writes (default false: the owner decides) */
      readonly allowElicitation?: boolean | undefined
    }) {
      const userName = input.user ?? OWNER
      const userId = yield* ensureUser(userName, userName === OWNER)
      return yield* mint(
        { userId, name: input.name, profile: input.profile, scope: input.scope ?? [], allowElicitation: input.allowElicitation === true },
        input.backlog === true
      )
    }, events.transaction, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /**
     * First start on an empty database: the owner user and a first `full` connection (caught up: there is
     * no history yet). Returns the minted connection (bearer included, to print once), or none when the
     * database already had users.
     */
    const bootstrapOwner = spanned("Auth.bootstrapOwner", Effect.fnUntraced(function*() {
      // daemons started together on an empty database: one bootstraps, the others then count its user
      yield* serialize(sql, "bootstrap-owner")
      const [[users]] = yield* countUsers({})
      if (Number(users) > 0) return Option.none<MintedConnection>()
      const userId = yield* ensureUser(OWNER, true)
      return Option.some(yield* mint({ userId, name: "owner", profile: "full", scope: [], allowElicitation: false }, false))
    }, events.transaction, Effect.orDie))

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
      liveOf,
      resolve,
      revoke,
      rename,
      authenticate,
      touch,
      get,
      connections,
      names,
      authorize,
      /** A user's id by name (the owner unless named): whose notification targets a CLI command means. */
      userIdOf: spanned("Auth.userIdOf", (user?: string) => Effect.orDie(userIdByName(user ?? OWNER))),
      noticeSilence
    } as const
  })
}) {}
