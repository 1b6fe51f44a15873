import { SqlClient } from "@effect/sql"
import { Config, Effect, Schema } from "effect"
import type { Caller, ConnectionInfo } from "../../domain/Auth.js"
import { connectionShort } from "../../domain/Auth.js"
import type { DeclareWaitInput, DeclareWaitResult } from "../../domain/Waits.js"
import { connectionRef, WAIT_CHANNEL, WaitCycle } from "../../domain/Waits.js"
import { Auth } from "../Auth.js"
import { Coordination } from "../Coordination.js"
import { makeStatements } from "../store/Statements.js"
import { cycleThrough } from "./Cycles.js"
import type { makeLeaseWaits } from "./LeaseWaits.js"

/**
 * What every declaration does whatever its predicate: the cycle check over the user's wait graph, the wait's
 * bound, its fleet-wide post and its row, its result.
 */

const decodeEdges = Schema.decodeUnknown(Schema.Array(Schema.Tuple(Schema.String, Schema.String)))

const iso = (ms: number) => new Date(ms).toISOString()

export const makeRecording = (leaseWaits: Effect.Effect.Success<ReturnType<typeof makeLeaseWaits>>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const coordination = yield* Coordination
    const { named, namedValues } = yield* makeStatements
    const config = yield* Effect.orDie(Config.all({
      defaultS: Config.number("SOPHIA_WAIT_DEFAULT_S").pipe(Config.withDefault(600)),
      ceilingS: Config.number("SOPHIA_WAIT_CEILING_S").pipe(Config.withDefault(3600))
    }))
  /** The user's open edges, waiter → awaited (rows as arrays: a graph of 10k edges is read whole). */
  const openEdges = namedValues("Waits.openEdges", (p: { userId: string }) =>
    sql`SELECT waiter_connection_id, on_connection_id FROM waits
      WHERE user_id = ${p.userId} AND status = 'open' AND pred_type <> 'lease_free'`)
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

    const nameOf = (connectionId: string) =>
      Effect.map(auth.get(connectionId), (info) => info._tag === "Some" ? info.value.name : connectionShort(connectionId))

    /** The user's wait graph as edges, waiter → awaited: the open waits' (a `lease_free` wait's run to the holders in its way now). */
    const edgesOf = (userId: string) =>
      Effect.gen(function*() {
        const posts = yield* Effect.flatMap(openEdges({ userId }), decodeEdges)
        const leases = yield* leaseWaits.edgesOf(userId)
        const edges: ReadonlyArray<readonly [string, string]> = [...posts, ...leases.map((e) => [e.waiter, e.on] as const)]
        return edges
      })

    /** The refusal naming `cycle` (connection ids, the first repeated at the end); `lease`: a grant's. */
    const cycleRefusal = (cycle: ReadonlyArray<string>, lease?: { readonly resources: ReadonlyArray<string>; readonly hint: string }) =>
      Effect.map(
        Effect.forEach([...cycle, cycle[0]], (id) => Effect.map(nameOf(id), (n) => connectionRef(id, n))),
        (refs) => new WaitCycle({ cycle: refs, ...(lease ?? {}) })
      )

    /**
     * Would the caller waiting on each of `targets` close a cycle? Refuses with the cycle (waiter first).
     */
    const refuseCycles = (caller: Caller, targets: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        if (targets.length === 0) return
        const edges = caller.connectionId === targets[0] && targets.length === 1 ? [] : yield* edgesOf(caller.userId)
        for (const on of targets) {
          const cycle = cycleThrough(edges, caller.connectionId, on)
          if (cycle === undefined) continue
          return yield* Effect.flip(cycleRefusal(cycle))
        }
      })

    /** The wait's bound: `timeout_s` (default, clamped to the ceiling with a warning). */
    const boundOf = (input: DeclareWaitInput, now: number) => {
      const requested = input.timeout_s ?? config.defaultS
      const timeoutS = Math.min(requested, config.ceilingS)
      const warning = requested > config.ceilingS ? `timeout_s ${requested} is above the ceiling; clamped to ${config.ceilingS} s` : undefined
      const expiresMs = now + Math.round(timeoutS * 1000)
      return { expiresMs, expiresAt: iso(expiresMs), warning }
    }

    /** The wait's post (fleet-wide, addressed to the awaited connection) and its row. */
    const record = (caller: Caller, input: DeclareWaitInput, w: {
      readonly waitId: string
      readonly on: ConnectionInfo
      readonly from: string | null
      readonly channel: string
      readonly kind: string | null
      readonly seq: number
      readonly stored: unknown
      readonly now: number
      readonly expiresMs: number
      readonly expiresAt: string
    }) =>
      Effect.gen(function*() {
        const post = yield* coordination.post(caller, {
          channel: WAIT_CHANNEL,
          kind: "status",
          body: `${caller.name} is waiting on ${w.on.name} until ${w.expiresAt}: ${input.reason}`.slice(0, 4000),
          ...(w.on.connection_id !== caller.connectionId ? { to: w.on.connection_id } : {}),
          payload: {
            wait: { wait_id: w.waitId, on: w.on.connection_id, predicate: w.stored, reason: input.reason.slice(0, 1000), expires_at: w.expiresAt }
          }
        })
        yield* insertWait({
          id: w.waitId,
          userId: caller.userId,
          waiter: caller.connectionId,
          on: w.on.connection_id,
          onSelector: input.on ?? w.on.connection_id,
          from: w.from,
          predType: input.predicate.type,
          channel: w.channel,
          kind: w.kind,
          seq: w.seq,
          predicate: JSON.stringify(w.stored),
          reason: input.reason,
          postId: post.post_id,
          createdAt: iso(w.now),
          expiresAt: w.expiresAt,
          expiresMs: w.expiresMs
        })
        return post.post_id
      })

    const resultOf = (waitId: string, postId: string, bound: { expiresAt: string; warning: string | undefined }, satisfied: boolean) => {
      const result: DeclareWaitResult = {
        wait_id: waitId,
        post_id: postId,
        expires_at: bound.expiresAt,
        ...(satisfied ? { resolution: "satisfied" as const } : {}),
        ...(bound.warning ? { warning: bound.warning } : {})
      }
      return result
    }


    return { edgesOf, cycleRefusal, refuseCycles, boundOf, record, resultOf } as const
  })
