import { SqlClient } from "@effect/sql"
import { Clock, Config, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller, ConnectionInfo } from "../../domain/Auth.js"
import { connectionShort } from "../../domain/Auth.js"
import { NotFound, ValidationError } from "../../domain/Errors.js"
import { InvalidTransition } from "../../domain/Ledger.js"
import type { DeclareWaitInput, DeclareWaitResult } from "../../domain/Waits.js"
import { connectionRef, WAIT_CHANNEL, WaitCycle } from "../../domain/Waits.js"
import { Auth } from "../Auth.js"
import { Coordination } from "../Coordination.js"
import { Events } from "../Events.js"
import { spanned } from "../Spans.js"
import { serialize } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"
import { cycleThrough } from "./Cycles.js"
import type { makeResolutions } from "./Resolutions.js"
import { satisfiedHow } from "./Resolutions.js"

/**
 * Declaring a wait and withdrawing it. A declared wait is a post the whole fleet sees (channel `waits`,
 * addressed to the awaited connection) and a row of `waits`, checked at once against what the channel
 * already holds; a wait that would close a cycle in the user's wait graph is refused.
 */

const decodeEdges = Schema.decodeUnknown(Schema.Array(Schema.Tuple(Schema.String, Schema.String)))
const decodeWait = Schema.decodeUnknown(Schema.Array(Schema.Struct({ waiter_connection_id: Schema.String, status: Schema.String })))

const iso = (ms: number) => new Date(ms).toISOString()

/** The statements of declaring and withdrawing a wait (over Waits' own table). */
const makeDeclarationStatements = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, namedValues } = yield* makeStatements
  /** The user's open edges, waiter → awaited (rows as arrays: a graph of 10k edges is read whole). */
  const openEdges = namedValues("Waits.openEdges", (p: { userId: string }) =>
    sql`SELECT waiter_connection_id, on_connection_id FROM waits WHERE user_id = ${p.userId} AND status = 'open'`)

  const insertWait = named("Waits.insert", (p: {
    id: string
    userId: string
    waiter: string
    on: string
    onSelector: string
    from: string | null
    predType: string
    channel: string
    kind: string | null
    seq: number
    predicate: string
    reason: string
    postId: string
    createdAt: string
    expiresAt: string
    expiresMs: number
  }) =>
    sql`INSERT INTO waits (id, user_id, waiter_connection_id, on_connection_id, on_selector, from_connection_id,
        pred_type, pred_channel, pred_kind, pred_seq, predicate, reason, post_id, created_at, expires_at, expires_ms, status)
      VALUES (${p.id}, ${p.userId}, ${p.waiter}, ${p.on}, ${p.onSelector}, ${p.from}, ${p.predType}, ${p.channel},
        ${p.kind}, ${p.seq}, ${p.predicate}, ${p.reason}, ${p.postId}, ${p.createdAt}, ${p.expiresAt}, ${p.expiresMs}, 'open')`)

  const findWait = named("Waits.find", (p: { userId: string; waitId: string }) =>
    sql`SELECT waiter_connection_id, status FROM waits WHERE id = ${p.waitId} AND user_id = ${p.userId}`)
  const cancelOpen = named("Waits.cancel", (p: { waitId: string; at: string }) =>
    sql`UPDATE waits SET status = 'cancelled', resolved_at = ${p.at}, delivered_at = ${p.at},
        how = 'cancelled by the waiter' WHERE id = ${p.waitId} AND status = 'open' RETURNING id`)

  return { openEdges, insertWait, findWait, cancelOpen } as const
})

export const makeDeclaration = (resolutions: Effect.Effect.Success<typeof makeResolutions>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const coordination = yield* Coordination
    const events = yield* Events
    const { openEdges, insertWait, findWait, cancelOpen } = yield* makeDeclarationStatements
    const config = yield* Effect.orDie(Config.all({
      defaultS: Config.number("SOPHIA_WAIT_DEFAULT_S").pipe(Config.withDefault(600)),
      ceilingS: Config.number("SOPHIA_WAIT_CEILING_S").pipe(Config.withDefault(3600))
    }))

    const nameOf = (connectionId: string) =>
      Effect.map(auth.get(connectionId), (info) => info._tag === "Some" ? info.value.name : connectionShort(connectionId))

    /** Would the caller waiting on `on` close a cycle? Returns the cycle (waiter first) or undefined. */
    const cycleOf = (caller: Caller, on: string) =>
      caller.connectionId === on
        ? Effect.succeed([on])
        : Effect.map(
          Effect.flatMap(openEdges({ userId: caller.userId }), decodeEdges),
          (edges) => cycleThrough(edges, caller.connectionId, on)
        )

    /**
     * Declare that the caller is blocked on a connection until a predicate holds. Writes a post the whole
     * fleet sees (channel `waits`, addressed to the awaited connection, the wait in its payload).
     */
    const declare = spanned("Waits.declare", Effect.fnUntraced(function*(caller: Caller, input: DeclareWaitInput) {
      const on: ConnectionInfo = yield* auth.resolve(caller.userId, input.on)
      const predicate = input.predicate
      const from = predicate.type === "post_exists"
        ? predicate.from === undefined ? on : yield* auth.resolve(caller.userId, predicate.from)
        : undefined
      // The cycle check and the insert are one decision over the user's whole wait graph: serialized per
      // user (advisory lock, store/Locking.ts), so two waits that together close a cycle cannot both pass it.
      yield* serialize(sql, `wait-graph/${caller.userId}`)
      const cycle = yield* cycleOf(caller, on.connection_id)
      if (cycle) {
        const refs = yield* Effect.forEach([...cycle, caller.connectionId], (id) => Effect.map(nameOf(id), (n) => connectionRef(id, n)))
        return yield* new WaitCycle({ cycle: refs })
      }

      const requested = input.timeout_s ?? config.defaultS
      const timeoutS = Math.min(requested, config.ceilingS)
      const warning = requested > config.ceilingS
        ? `timeout_s ${requested} is above the ceiling; clamped to ${config.ceilingS} s`
        : undefined
      const now = yield* Clock.currentTimeMillis
      const expiresMs = now + Math.round(timeoutS * 1000)
      const expiresAt = iso(expiresMs)

      const waitId = `wait-${randomUUID()}`
      // no post lands on the predicate's channel until this declaration commits (see Coordination.holdChannel):
      // a post either committed before (read below) or comes after and its hook sees this wait
      yield* coordination.holdChannel(caller.userId, predicate.channel)
      // the channel's sequence as it stands before the wait's own post, so that post can never count
      const currentSeq = yield* coordination.lastSeq(caller.userId, predicate.channel)
      const predSeq = predicate.type === "seq_reached" ? predicate.seq : predicate.after_seq ?? currentSeq
      const stored = predicate.type === "post_exists"
        ? { ...predicate, from: from!.connection_id, after_seq: predSeq }
        : predicate
      const post = yield* coordination.post(caller, {
        channel: WAIT_CHANNEL,
        kind: "status",
        body: `${caller.name} is waiting on ${on.name} until ${expiresAt}: ${input.reason}`.slice(0, 4000),
        to: on.connection_id,
        payload: {
          wait: { wait_id: waitId, on: on.connection_id, predicate: stored, reason: input.reason.slice(0, 1000), expires_at: expiresAt }
        }
      })
      yield* insertWait({
        id: waitId,
        userId: caller.userId,
        waiter: caller.connectionId,
        on: on.connection_id,
        onSelector: input.on,
        from: from?.connection_id ?? null,
        predType: predicate.type,
        channel: predicate.channel,
        kind: predicate.type === "post_exists" ? predicate.kind ?? null : null,
        seq: predSeq,
        predicate: JSON.stringify(stored),
        reason: input.reason,
        postId: post.post_id,
        createdAt: iso(now),
        expiresAt,
        expiresMs
      })

      // the predicate may already hold: read it now (only a post the system can name satisfies it)
      const already = yield* coordination.firstPost(
        predicate.type === "seq_reached"
          ? { userId: caller.userId, channel: predicate.channel, atSeq: predicate.seq, except: post.post_id }
          : {
            userId: caller.userId,
            channel: predicate.channel,
            afterSeq: predSeq,
            from: from!.connection_id,
            ...(predicate.kind !== undefined ? { kind: predicate.kind } : {}),
            except: post.post_id
          }
      )
      let resolution: "satisfied" | undefined
      if (Option.isSome(already)) {
        const p = already.value
        yield* resolutions.resolve(waitId, {
          status: "satisfied",
          at: iso(now),
          by: p.connection_id,
          postId: p.id,
          how: satisfiedHow({ post_id: p.id, kind: p.kind, channel: predicate.channel, channel_seq: p.channel_seq })
        })
        resolution = "satisfied"
      }
      const result: DeclareWaitResult = {
        wait_id: waitId,
        post_id: post.post_id,
        expires_at: expiresAt,
        ...(resolution ? { resolution } : {}),
        ...(warning ? { warning } : {})
      }
      return result
    }, events.transaction, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /** The waiter withdraws an open wait. */
    const cancel = spanned("Waits.cancel", Effect.fnUntraced(function*(caller: Caller, waitId: string) {
      const [wait] = yield* Effect.flatMap(findWait({ userId: caller.userId, waitId }), decodeWait)
      if (wait === undefined) return yield* new NotFound({ what: "wait", id: waitId })
      if (wait.waiter_connection_id !== caller.connectionId) {
        return yield* new ValidationError({ detail: `wait ${waitId} belongs to another connection; only its waiter can cancel it` })
      }
      const updated = yield* cancelOpen({ waitId, at: iso(yield* Clock.currentTimeMillis) })
      if (updated.length === 0) {
        return yield* new InvalidTransition({ detail: `wait ${waitId} is already ${wait.status}; only an open wait can be cancelled` })
      }
      return { wait_id: waitId, status: "cancelled" as const }
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    return { declare, cancel } as const
  })
