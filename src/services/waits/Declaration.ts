import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller, ConnectionInfo } from "../../domain/Auth.js"
import { NotFound, ValidationError } from "../../domain/Errors.js"
import { InvalidTransition } from "../../domain/Ledger.js"
import { parseResource } from "../../domain/LeaseGlobs.js"
import { DEFAULT_PROJECT } from "../../domain/Leases.js"
import type { DeclareWaitInput, LeaseFree, PostExists, SeqReached } from "../../domain/Waits.js"
import { Auth } from "../Auth.js"
import { Coordination } from "../Coordination.js"
import { Events } from "../Events.js"
import { spanned } from "../Spans.js"
import { serialize, WAIT_GRAPH_LOCK } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"
import type { makeLeaseWaits } from "./LeaseWaits.js"
import type { makeRecording } from "./Recording.js"
import type { makeResolutions } from "./Resolutions.js"
import { satisfiedHow } from "./Resolutions.js"

/**
 * Declaring a wait and withdrawing it. A declared wait is a post the whole fleet sees (channel `waits`,
 * addressed to the awaited connection) and a row of `waits` (both written by `Recording`), checked at once
 * against what the channel already holds (a `lease_free` wait: against the leases); a wait that would close
 * a cycle in the user's wait graph is refused.
 */

const decodeWait = Schema.decodeUnknown(Schema.Array(Schema.Struct({ waiter_connection_id: Schema.String, status: Schema.String })))

const iso = (ms: number) => new Date(ms).toISOString()

/** The statements of declaring and withdrawing a wait (over Waits' own table). */
const makeDeclarationStatements = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements

  const findWait = named("Waits.find", (p: { userId: string; waitId: string }) =>
    sql`SELECT waiter_connection_id, status FROM waits WHERE id = ${p.waitId} AND user_id = ${p.userId}`)
  const cancelOpen = named("Waits.cancel", (p: { waitId: string; at: string }) =>
    sql`UPDATE waits SET status = 'cancelled', resolved_at = ${p.at}, delivered_at = ${p.at},
        how = 'cancelled by the waiter' WHERE id = ${p.waitId} AND status = 'open' RETURNING id`)

  return { findWait, cancelOpen } as const
})

export const makeDeclaration = (
  resolutions: Effect.Effect.Success<typeof makeResolutions>,
  leaseWaits: Effect.Effect.Success<ReturnType<typeof makeLeaseWaits>>,
  recording: Effect.Effect.Success<ReturnType<typeof makeRecording>>
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const coordination = yield* Coordination
    const events = yield* Events
    const { findWait, cancelOpen } = yield* makeDeclarationStatements
    const { boundOf, record, refuseCycles, resultOf } = recording

    /** A wait on posts (`post_exists`, `seq_reached`): on one connection, satisfied by a post the system can name. */
    const declarePosts = (caller: Caller, input: DeclareWaitInput, predicate: PostExists | SeqReached) =>
      Effect.gen(function*() {
        if (input.on === undefined) return yield* new ValidationError({ detail: `on: required for ${predicate.type}` })
        const on: ConnectionInfo = yield* auth.resolve(caller.userId, input.on)
        const from = predicate.type === "post_exists"
          ? predicate.from === undefined ? on : yield* auth.resolve(caller.userId, predicate.from)
          : undefined
        // The cycle check and the insert are one decision over the user's whole wait graph: serialized per
        // user (advisory lock, store/Locking.ts), so two waits that together close a cycle cannot both pass it.
        yield* serialize(sql, WAIT_GRAPH_LOCK(caller.userId))
        yield* refuseCycles(caller, [on.connection_id])
        const now = yield* Clock.currentTimeMillis
        const bound = boundOf(input, now)
        const waitId = `wait-${randomUUID()}`
        // no post lands on the predicate's channel until this declaration commits (see Coordination.holdChannel):
        // a post either committed before (read below) or comes after and its hook sees this wait
        yield* coordination.holdChannel(caller.userId, predicate.channel)
        // the channel's sequence as it stands before the wait's own post, so that post can never count
        const currentSeq = yield* coordination.lastSeq(caller.userId, predicate.channel)
        const predSeq = predicate.type === "seq_reached" ? predicate.seq : predicate.after_seq ?? currentSeq
        const stored = predicate.type === "post_exists" ? { ...predicate, from: from!.connection_id, after_seq: predSeq } : predicate
        const postId = yield* record(caller, input, {
          waitId,
          on,
          from: from?.connection_id ?? null,
          channel: predicate.channel,
          kind: predicate.type === "post_exists" ? predicate.kind ?? null : null,
          seq: predSeq,
          stored,
          now,
          ...bound
        })
        // the predicate may already hold: read it now (only a post the system can name satisfies it)
        const already = yield* coordination.firstPost(
          predicate.type === "seq_reached"
            ? { userId: caller.userId, channel: predicate.channel, atSeq: predicate.seq, except: postId }
            : {
              userId: caller.userId,
              channel: predicate.channel,
              afterSeq: predSeq,
              from: from!.connection_id,
              ...(predicate.kind !== undefined ? { kind: predicate.kind } : {}),
              except: postId
            }
        )
        if (Option.isSome(already)) {
          const p = already.value
          yield* resolutions.resolve(waitId, {
            status: "satisfied",
            at: iso(now),
            by: p.connection_id,
            postId: p.id,
            how: satisfiedHow({ post_id: p.id, kind: p.kind, channel: predicate.channel, channel_seq: p.channel_seq })
          })
        }
        return resultOf(waitId, postId, bound, Option.isSome(already))
      })

    /**
     * A wait on a lease (`lease_free`): its edges run to the live holders in the way (refused if one of them
     * waits, directly or not, on the caller); addressed to `on`, by default the first of them; satisfied at
     * once when there is none.
     */
    const declareLease = (caller: Caller, input: DeclareWaitInput, predicate: LeaseFree) =>
      Effect.gen(function*() {
        const parsed = parseResource(predicate.resource)
        if (typeof parsed === "string") return yield* new ValidationError({ detail: `predicate.resource: ${parsed}` })
        const stored: LeaseFree = { ...predicate, resource: parsed.resource, project: predicate.project ?? DEFAULT_PROJECT }
        yield* serialize(sql, WAIT_GRAPH_LOCK(caller.userId))
        const holders = yield* leaseWaits.holders(caller.userId, caller.connectionId, stored)
        const on: ConnectionInfo = input.on !== undefined
          ? yield* auth.resolve(caller.userId, input.on)
          : Option.getOrThrow(yield* auth.get(holders[0]?.connection_id ?? caller.connectionId))
        yield* refuseCycles(caller, [...new Set(holders.map((h) => h.connection_id))])
        const now = yield* Clock.currentTimeMillis
        const bound = boundOf(input, now)
        const waitId = `wait-${randomUUID()}`
        const postId = yield* record(caller, input, { waitId, on, from: null, channel: "", kind: null, seq: 0, stored, now, ...bound })
        if (holders.length === 0) {
          yield* resolutions.resolve(waitId, {
            status: "satisfied",
            at: iso(now),
            by: null,
            postId: null,
            how: `${stored.resource} can be granted: no live holder in the way`
          })
        }
        return resultOf(waitId, postId, bound, holders.length === 0)
      })

    /**
     * Declare that the caller is blocked until a predicate holds. Writes a post the whole fleet sees
     * (channel `waits`, addressed to the awaited connection, the wait in its payload).
     */
    const declare = spanned("Waits.declare", Effect.fnUntraced(function*(caller: Caller, input: DeclareWaitInput) {
      const predicate = input.predicate
      return predicate.type === "lease_free"
        ? yield* declareLease(caller, input, predicate)
        : yield* declarePosts(caller, input, predicate)
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
