import { SqlClient, SqlSchema } from "@effect/sql"
import { Clock, Config, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller, ConnectionInfo } from "../domain/Auth.js"
import { connectionShort } from "../domain/Auth.js"
import type { BlockingItem, WaitResolvedItem } from "../domain/Envelope.js"
import { WaitResolution } from "../domain/Envelope.js"
import { NotFound, ValidationError } from "../domain/Errors.js"
import type { ConnectionRevoked, PostLanded } from "../domain/Events.js"
import { WaitResolved } from "../domain/Events.js"
import { InvalidTransition } from "../domain/Ledger.js"
import type { ConnectionRef, DeclareWaitInput, DeclareWaitResult, WaitEdge, WaitGraphResult } from "../domain/Waits.js"
import { SignalFlags, WAIT_CHANNEL, WaitCycle } from "../domain/Waits.js"
import { orphanOf, silentAfterSConfig } from "../domain/Orphans.js"
import { Auth } from "./Auth.js"
import { Coordination } from "./Coordination.js"
import { serialize } from "./Dialect.js"
import { Events } from "./Events.js"
import { Ledger } from "./Ledger.js"
import { spanned } from "./Spans.js"
import { makeFixedStatements } from "./Statements.js"
import { makeStatements } from "./store/Statements.js"
import { DbInt } from "../domain/Time.js"

/**
 * Waits: declarative blocking over posts.
 *
 * A wait is checked (1) inside the transaction of every post written to its channel (`onPostLanded`,
 * subscribed to `PostLanded`), (2) at declaration, against what the channel already holds, (3) inside
 * the transaction that revokes the awaited connection (`onConnectionRevoked`: `unverifiable` then, not
 * at the deadline), and (4) by the sweep, which marks overdue waits `unsatisfied`. Every resolution is
 * one conditional update `... WHERE status = 'open'`, so a wait resolves exactly once whichever daemon,
 * sweep or post gets there first, and publishes `WaitResolved` in the same transaction. `satisfied`
 * always names the post that satisfied it and its author. Owns `waits`; names come from Auth, posts
 * from Coordination.
 */

const JsonObject = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const OpenWaitRow = Schema.Struct({
  id: Schema.String,
  pred_type: Schema.Literal("post_exists", "seq_reached"),
  pred_kind: Schema.NullOr(Schema.String),
  pred_seq: DbInt,
  from_connection_id: Schema.NullOr(Schema.String)
})
const decodeOpenWaits = Schema.decodeUnknown(Schema.Array(OpenWaitRow))

const BlockingRow = Schema.Struct({
  id: Schema.String,
  on_connection_id: Schema.String,
  predicate: JsonObject,
  expires_at: Schema.String
})
const decodeBlocking = Schema.decodeUnknown(Schema.Array(BlockingRow))

const ResolvedRow = Schema.Struct({
  id: Schema.String,
  status: WaitResolution,
  resolved_by: Schema.NullOr(Schema.String),
  how: Schema.String,
  resolved_at: Schema.String
})
const decodeResolved = Schema.decodeUnknown(Schema.Array(ResolvedRow))
const decodeFlags = Schema.decodeUnknown(Schema.Tuple(SignalFlags))
const decodeTargets = Schema.decodeUnknown(Schema.Array(Schema.Struct({ on_connection_id: Schema.String, created_at: Schema.String })))
const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))

const EdgeRow = Schema.Struct({
  id: Schema.String,
  waiter_connection_id: Schema.String,
  on_connection_id: Schema.String,
  predicate: JsonObject,
  reason: Schema.String,
  expires_at: Schema.String,
  created_at: Schema.String
})
const decodeEdges = Schema.decodeUnknown(Schema.Array(EdgeRow))

/** What a resolving update returns: enough to publish `WaitResolved`. */
const ResolvedWait = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  pred_channel: Schema.String,
  status: WaitResolution,
  resolved_by: Schema.NullOr(Schema.String),
  resolved_at: Schema.String,
  waiter_connection_id: Schema.String
})
const decodeResolvedWaits = Schema.decodeUnknown(Schema.Array(ResolvedWait))
const RESOLVED_COLUMNS = "id, user_id, pred_channel, status, resolved_by, resolved_at, waiter_connection_id"

const ref = (connectionId: string, name: string): ConnectionRef => ({
  connection_id: connectionId,
  connection_short: connectionShort(connectionId),
  agent_name: name
})

/** Elementary cycles of a small directed graph, each once (rotated to start at its smallest node). */
export const findCycles = (edges: ReadonlyArray<readonly [from: string, to: string]>): Array<Array<string>> => {
  const out = new Map<string, Array<string>>()
  for (const [from, to] of edges) {
    const list = out.get(from)
    if (list) list.push(to)
    else out.set(from, [to])
  }
  const seen = new Set<string>()
  const cycles: Array<Array<string>> = []
  const state = new Map<string, "active" | "done">()
  const stack: Array<string> = []
  const visit = (node: string) => {
    state.set(node, "active")
    stack.push(node)
    for (const next of out.get(node) ?? []) {
      if (state.get(next) === "active") {
        const cycle = stack.slice(stack.indexOf(next))
        const start = cycle.indexOf([...cycle].sort()[0])
        const rotated = [...cycle.slice(start), ...cycle.slice(0, start)]
        const key = rotated.join(">")
        if (!seen.has(key)) {
          seen.add(key)
          cycles.push(rotated)
        }
      } else if (!state.has(next)) {
        visit(next)
      }
    }
    stack.pop()
    state.set(node, "done")
  }
  for (const node of out.keys()) if (!state.has(node)) visit(node)
  return cycles
}

export class Waits extends Effect.Service<Waits>()("sophia/Waits", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const coordination = yield* Coordination
    const events = yield* Events
    const ledger = yield* Ledger
    const fixed = yield* makeFixedStatements
    const { named, namedValues } = yield* makeStatements
    const config = yield* Effect.orDie(Config.all({
      defaultS: Config.number("SOPHIA_WAIT_DEFAULT_S").pipe(Config.withDefault(600)),
      ceilingS: Config.number("SOPHIA_WAIT_CEILING_S").pipe(Config.withDefault(3600)),
      silentAfterS: silentAfterSConfig
    }))

    const iso = (ms: number) => new Date(ms).toISOString()

    /** The one way a wait resolves: a conditional update, zero rows = someone else resolved it first. */
    const resolve = (waitId: string, resolution: {
      readonly status: "satisfied" | "unsatisfied" | "unverifiable"
      readonly at: string
      readonly by: string | null
      readonly postId: string | null
      readonly how: string
    }) =>
      sql`UPDATE waits SET status = ${resolution.status}, resolved_at = ${resolution.at},
          resolved_by = ${resolution.by}, resolved_post_id = ${resolution.postId}, how = ${resolution.how}
        WHERE id = ${waitId} AND status = 'open'
        RETURNING ${sql.literal(RESOLVED_COLUMNS)}`.pipe(Effect.flatMap(published))

    /**
     * Publish each resolution (inside the transaction that resolved it: the ledger observes it there).
     * Returns how many there were.
     */
    const published = (rows: ReadonlyArray<unknown>) =>
      Effect.flatMap(decodeResolvedWaits(rows), (resolved) =>
        Effect.as(Effect.forEach(resolved, (r) =>
          events.publish(
            new WaitResolved({
              user_id: r.user_id,
              wait_id: r.id,
              channel: r.pred_channel,
              resolution: r.status,
              resolved_by: r.resolved_by,
              waiter: r.waiter_connection_id,
              at: r.resolved_at
            })
          ), { discard: true }), resolved.length))

    const satisfiedHow = (post: { post_id: string; kind: string; channel: string; channel_seq: number }) =>
      `post ${post.post_id} (${post.kind}, channel_seq ${post.channel_seq} in ${post.channel})`

    /** The open waits on a channel (the partial index `waits_open_channel`): every post asks, on its own connection. */
    const openOnChannel = fixed((userId: string, channel: string) =>
      sql`SELECT id, pred_type, pred_kind, pred_seq, from_connection_id FROM waits
        WHERE user_id = ${userId} AND pred_channel = ${channel} AND status = 'open'`)

    /** `PostLanded` (inside the post's transaction): resolve the open waits on its channel that it satisfies. */
    const onPostLanded = (row: PostLanded) =>
      Effect.gen(function*() {
        const rows = yield* openOnChannel(row.user_id, row.channel)
        // the common case: no wait on the channel, nothing to decode
        if (rows.length === 0) return
        const open = yield* decodeOpenWaits(rows)
        for (const wait of open) {
          const matches = wait.pred_type === "seq_reached"
            ? row.channel_seq >= wait.pred_seq
            : row.channel_seq > wait.pred_seq &&
              (wait.pred_kind === null || wait.pred_kind === row.kind) &&
              (wait.from_connection_id === null || wait.from_connection_id === row.author)
          if (matches) {
            yield* resolve(wait.id, {
              status: "satisfied",
              at: row.created_at,
              by: row.author,
              postId: row.post_id,
              how: satisfiedHow(row)
            })
          }
        }
      }).pipe(Effect.orDie)

    /** `ConnectionRevoked` (inside its transaction): waits on it become unverifiable now; its own waits end. */
    const onConnectionRevoked = (revoked: ConnectionRevoked) =>
      Effect.gen(function*() {
        yield* sql`UPDATE waits SET status = 'unverifiable', resolved_at = ${revoked.at}, resolved_by = NULL,
            how = ${`connection ${revoked.connection_id} was revoked: the predicate can no longer be read`}
          WHERE user_id = ${revoked.user_id} AND status = 'open'
            AND (on_connection_id = ${revoked.connection_id} OR from_connection_id = ${revoked.connection_id})
          RETURNING ${sql.literal(RESOLVED_COLUMNS)}`.pipe(Effect.flatMap(published))
        // a revoked waiter can never read a signal: its waits end without a delivery
        yield* sql`UPDATE waits SET status = 'cancelled', resolved_at = ${revoked.at}, delivered_at = ${revoked.at},
            how = 'the waiting connection was revoked'
          WHERE user_id = ${revoked.user_id} AND status = 'open' AND waiter_connection_id = ${revoked.connection_id}`
      }).pipe(Effect.orDie)

    const openEdges = SqlSchema.findAll({
      Request: Schema.String,
      Result: Schema.Struct({ w: Schema.String, o: Schema.String }),
      execute: (userId) =>
        sql`SELECT waiter_connection_id AS w, on_connection_id AS o FROM waits WHERE user_id = ${userId} AND status = 'open'`
    })

    /** Would `waiter` waiting on `on` close a cycle? Returns the cycle (waiter first) or undefined. */
    const cycleThrough = (userId: string, waiter: string, on: string) =>
      Effect.gen(function*() {
        if (waiter === on) return [waiter]
        const rows = yield* openEdges(userId)
        const next = new Map<string, Array<string>>()
        for (const r of rows) {
          const list = next.get(r.w)
          if (list) list.push(r.o)
          else next.set(r.w, [r.o])
        }
        // breadth-first from `on` along "is waiting on" edges, looking for `waiter`
        const parent = new Map<string, string>([[on, on]])
        const queue = [on]
        while (queue.length > 0) {
          const node = queue.shift()!
          for (const n of next.get(node) ?? []) {
            if (parent.has(n)) continue
            parent.set(n, node)
            if (n === waiter) {
              const path: Array<string> = []
              for (let at = node; at !== on; at = parent.get(at)!) path.unshift(at)
              return [waiter, on, ...path]
            }
            queue.push(n)
          }
        }
        return undefined
      })

    const nameOf = (connectionId: string) =>
      Effect.map(auth.get(connectionId), (info) => info._tag === "Some" ? info.value.name : connectionShort(connectionId))

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
      // user (advisory lock, Dialect.ts), so two waits that together close a cycle cannot both pass it.
      yield* serialize(sql, `wait-graph/${caller.userId}`)
      const cycle = yield* cycleThrough(caller.userId, caller.connectionId, on.connection_id)
      if (cycle) {
        const refs = yield* Effect.forEach([...cycle, caller.connectionId], (id) => Effect.map(nameOf(id), (n) => ref(id, n)))
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
      yield* sql`INSERT INTO waits (id, user_id, waiter_connection_id, on_connection_id, on_selector, from_connection_id,
          pred_type, pred_channel, pred_kind, pred_seq, predicate, reason, post_id, created_at, expires_at, expires_ms, status)
        VALUES (${waitId}, ${caller.userId}, ${caller.connectionId}, ${on.connection_id}, ${input.on},
          ${from?.connection_id ?? null}, ${predicate.type}, ${predicate.channel},
          ${predicate.type === "post_exists" ? predicate.kind ?? null : null}, ${predSeq}, ${JSON.stringify(stored)},
          ${input.reason}, ${post.post_id}, ${iso(now)}, ${expiresAt}, ${expiresMs}, 'open')`

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
        yield* resolve(waitId, {
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

    const findWait = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, waitId: Schema.String }),
      Result: Schema.Struct({ waiter_connection_id: Schema.String, status: Schema.String }),
      execute: ({ userId, waitId }) =>
        sql`SELECT waiter_connection_id, status FROM waits WHERE id = ${waitId} AND user_id = ${userId}`
    })

    /** The waiter withdraws an open wait. */
    const cancel = spanned("Waits.cancel", Effect.fnUntraced(function*(caller: Caller, waitId: string) {
      const found = yield* findWait({ userId: caller.userId, waitId })
      if (Option.isNone(found)) return yield* new NotFound({ what: "wait", id: waitId })
      const wait = found.value
      if (wait.waiter_connection_id !== caller.connectionId) {
        return yield* new ValidationError({ detail: `wait ${waitId} belongs to another connection; only its waiter can cancel it` })
      }
      const now = iso(yield* Clock.currentTimeMillis)
      const updated = yield* sql`UPDATE waits SET status = 'cancelled', resolved_at = ${now}, delivered_at = ${now},
          how = 'cancelled by the waiter' WHERE id = ${waitId} AND status = 'open' RETURNING id`
      if (updated.length === 0) {
        return yield* new InvalidTransition({ detail: `wait ${waitId} is already ${wait.status}; only an open wait can be cancelled` })
      }
      return { wait_id: waitId, status: "cancelled" as const }
    }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    const overdueIds = SqlSchema.findAll({
      Request: Schema.Number,
      Result: Schema.Struct({ id: Schema.String }),
      execute: (now) => sql`SELECT id FROM waits WHERE status = 'open' AND expires_ms <= ${now} ORDER BY expires_ms`
    })
    const openOn = SqlSchema.findAll({
      Request: Schema.Void,
      Result: Schema.Struct({ id: Schema.String, on_connection_id: Schema.String }),
      execute: () => sql`SELECT id, on_connection_id FROM waits WHERE status = 'open'`
    })

    /**
     * Resolve every overdue wait `unsatisfied` (and, as a fallback, every wait on a revoked connection
     * `unverifiable`). Runs whether or not anyone is watching; safe with several daemons on one database.
     * Returns how many waits this call resolved.
     */
    const sweep = spanned("Waits.sweep", Effect.fnUntraced(function*() {
      const now = yield* Clock.currentTimeMillis
      const at = iso(now)
      // Each wait resolves in its own short transaction — the conditional update, `WaitResolved` and what
      // its subscribers write (the ledger's observation) commit together or not at all — and no
      // transaction is held across waits, so a sweep never keeps the write lock while others wait for it.
      // A wait another daemon or a post resolved first is skipped by `status = 'open'` (0 rows).
      let resolved = 0
      for (const { id } of yield* overdueIds(now)) {
        resolved += yield* sql`UPDATE waits SET status = 'unsatisfied', resolved_at = ${at},
            resolved_by = NULL, how = 'the bound passed (' || expires_at || ') with the predicate unmet'
          WHERE id = ${id} AND status = 'open'
          RETURNING ${sql.literal(RESOLVED_COLUMNS)}`.pipe(Effect.flatMap(published), events.transaction)
      }
      // the fallback for a revocation whose transaction did not resolve the waits on it (the revocation
      // itself resolves them; this only mops up): ask Auth which awaited connections are revoked
      const open = yield* openOn(undefined)
      const connections = yield* auth.connections(open.map((w) => w.on_connection_id))
      for (const wait of open) {
        if (connections.get(wait.on_connection_id)?.revoked_at == null) continue
        resolved += yield* events.transaction(resolve(wait.id, {
          status: "unverifiable",
          at,
          by: null,
          postId: null,
          how: "the awaited connection was revoked: the predicate can no longer be read"
        }))
      }
      return resolved
    }, Effect.orDie))

    /**
     * The envelope signals of one caller: `_blocking` (its open waits, names joined live) and
     * `_wait_resolved` (resolutions not yet delivered — claimed by a conditional update, so each is
     * delivered exactly once even to concurrent calls). `deliver: false` leaves them for a later response.
     */
    const noBlocking: ReadonlyArray<BlockingItem> = []
    const noResolved: ReadonlyArray<WaitResolvedItem> = []
    /** Whether the waiter has an open wait (the partial index `waits_open_waiter`): a SQL truth value. */
    const openExpr = (waiter: string) =>
      sql`EXISTS (SELECT 1 FROM waits WHERE waiter_connection_id = ${waiter} AND status = 'open')`
    /** Whether a resolution awaits delivery to the waiter (the partial index `waits_undelivered`). */
    const undeliveredExpr = (waiter: string) =>
      sql`EXISTS (SELECT 1 FROM waits WHERE waiter_connection_id = ${waiter} AND status <> 'open' AND delivered_at IS NULL)`
    const probe = fixed((waiter: string, sameWaiter: string) =>
      sql`SELECT ${openExpr(waiter)} AS open, ${undeliveredExpr(sameWaiter)} AS undelivered`)
    // runs on every response of every tool (the envelope): untraced, one fixed statement when idle
    const signals = (caller: Caller, deliver = true) =>
      probe(caller.connectionId, caller.connectionId).pipe(
        Effect.flatMap(decodeFlags),
        Effect.flatMap(([flags]) => signalsAfter(caller, flags, deliver)),
        Effect.orDie
      )
    /**
     * The signals once the flags are read (by `signals`, or by the envelope's one probe that reads them
     * beside the unread count: `openExpr`, `undeliveredExpr`). Nothing open and nothing to deliver: no
     * statement at all.
     */
    const signalsAfter = Effect.fnUntraced(function*(caller: Caller, flags: SignalFlags, deliver = true) {
      let resolved: ReadonlyArray<WaitResolvedItem> = noResolved
      if (deliver && flags.undelivered) {
        const undelivered = yield* sql`SELECT id FROM waits
          WHERE waiter_connection_id = ${caller.connectionId} AND status <> 'open' AND delivered_at IS NULL`.pipe(
          Effect.flatMap(decodeIds)
        )
        const now = iso(yield* Clock.currentTimeMillis)
        const claimed = yield* sql`UPDATE waits SET delivered_at = ${now}
          WHERE ${sql.in("id", undelivered.map((r) => r.id))} AND delivered_at IS NULL
          RETURNING id, status, resolved_by, how, resolved_at`.pipe(Effect.flatMap(decodeResolved))
        resolved = claimed.map((r) => ({
          wait_id: r.id,
          resolution: r.status,
          resolved_by: r.resolved_by,
          how: r.how,
          resolved_at: r.resolved_at
        }))
      }
      if (!flags.open) return { blocking: noBlocking, resolved }
      const open = yield* sql`SELECT id, on_connection_id, predicate, expires_at FROM waits
        WHERE waiter_connection_id = ${caller.connectionId} AND status = 'open'
        ORDER BY created_at, id`.pipe(Effect.flatMap(decodeBlocking))
      const names = yield* auth.connections(open.map((w) => w.on_connection_id))
      const blocking: ReadonlyArray<BlockingItem> = open.map((w) => ({
        wait_id: w.id,
        on: ref(w.on_connection_id, names.get(w.on_connection_id)?.name ?? ""),
        predicate: w.predicate,
        expires_at: w.expires_at
      }))
      return { blocking, resolved }
    }, Effect.orDie)

    /** Why an open wait will never be answered (its awaited connection revoked or silent), or undefined. */
    const orphanedWait = (
      wait: { readonly on_connection_id: string; readonly created_at: string },
      connections: ReadonlyMap<string, ConnectionInfo>,
      now: number
    ) => {
      const awaited = connections.get(wait.on_connection_id)
      // a connection never seen is silent since the wait was declared
      return orphanOf(awaited && { ...awaited, created_at: awaited.last_seen_at ?? wait.created_at }, now, config.silentAfterS)
    }

    /** Who is blocked on whom across the caller's user, with cycles and the half of "orphaned" we can compute. */
    const graph = spanned("Waits.graph", Effect.fnUntraced(function*(caller: Caller) {
      const rows = yield* sql`SELECT id, waiter_connection_id, on_connection_id, predicate, reason, expires_at, created_at
        FROM waits WHERE user_id = ${caller.userId} AND status = 'open'
        ORDER BY created_at, id`.pipe(Effect.flatMap(decodeEdges))
      const now = yield* Clock.currentTimeMillis
      const connections = yield* auth.connections(rows.flatMap((r) => [r.waiter_connection_id, r.on_connection_id]))
      const nameOf = (id: string) => connections.get(id)?.name ?? connectionShort(id)
      const edges: Array<WaitEdge> = rows.map((r) => {
        return {
          wait_id: r.id,
          waiter: ref(r.waiter_connection_id, nameOf(r.waiter_connection_id)),
          on: ref(r.on_connection_id, nameOf(r.on_connection_id)),
          predicate: r.predicate,
          reason: r.reason,
          expires_at: r.expires_at
        }
      })
      const cycles = findCycles(rows.map((r) => [r.waiter_connection_id, r.on_connection_id] as const)).map((cycle) =>
        [...cycle, cycle[0]].map((id) => ref(id, nameOf(id)))
      )
      const orphaned = rows.flatMap((r): Array<WaitGraphResult["orphaned"]["waits"][number]> => {
        const gone = orphanedWait(r, connections, now)
        return gone === undefined ? [] : [{
          wait_id: r.id,
          connection_id: r.on_connection_id,
          on: ref(r.on_connection_id, nameOf(r.on_connection_id)),
          reason: gone.reason,
          why: gone.reason,
          since: gone.since
        }]
      })
      const result: WaitGraphResult = {
        edges,
        cycles,
        orphaned: { waits: orphaned, work: yield* ledger.orphanedWork(caller.userId), silent_after_s: config.silentAfterS }
      }
      return result
    }, Effect.orDie))

    /**
     * How many open waits of the user nobody will answer (the count `wait_graph` lists as orphaned), without
     * building the graph: only who each wait is on and since when.
     */
    const openTargets = fixed((userId: string) =>
      sql`SELECT on_connection_id, created_at FROM waits WHERE user_id = ${userId} AND status = 'open'`)
    const countOrphaned = (caller: Caller): Effect.Effect<number> =>
      Effect.gen(function*() {
        const rows = yield* openTargets(caller.userId).pipe(Effect.flatMap(decodeTargets))
        if (rows.length === 0) return 0
        const connections = yield* auth.connections(rows.map((r) => r.on_connection_id))
        const now = yield* Clock.currentTimeMillis
        return rows.filter((r) => orphanedWait(r, connections, now) !== undefined).length
      }).pipe(Effect.orDie)

    /** How many open waits the user has, as one SQL expression (for a caller's combined probe: `Orient`). */
    const countOpenExpr = (userId: string) => sql`(SELECT COUNT(*) FROM waits WHERE user_id = ${userId} AND status = 'open')`

    /**
     * The caller's two flags (an open wait, a resolution not yet delivered): one statement over the partial
     * indexes `waits_open_waiter` and `waits_undelivered`. Runs on every response of every tool (the
     * envelope): untraced.
     */
    const flagsOf = named("Waits.flags", (p: { waiter: string }) =>
      sql`SELECT EXISTS (SELECT 1 FROM waits WHERE waiter_connection_id = ${p.waiter} AND status = 'open') AS open,
        EXISTS (SELECT 1 FROM waits WHERE waiter_connection_id = ${p.waiter} AND status <> 'open' AND delivered_at IS NULL) AS undelivered`)
    const flags = (caller: Caller): Effect.Effect<SignalFlags> =>
      flagsOf({ waiter: caller.connectionId }).pipe(
        Effect.flatMap(decodeFlags),
        Effect.map(([f]) => f),
        Effect.orDie
      )

    const countOpenOf = namedValues("Waits.countOpen", (p: { userId: string }) =>
      sql`SELECT COUNT(*) FROM waits WHERE user_id = ${p.userId} AND status = 'open'`)
    /** How many open waits the user has. */
    const countOpen = spanned("Waits.countOpen", (userId: string): Effect.Effect<number> =>
      countOpenOf({ userId }).pipe(Effect.map((rows) => Number(rows[0][0])), Effect.orDie))

    const openByWaiter = namedValues("Waits.openCountsByWaiter", (p: { userId: string }) =>
      sql`SELECT waiter_connection_id, COUNT(*) FROM waits WHERE user_id = ${p.userId} AND status = 'open'
        GROUP BY waiter_connection_id`)
    /** The user's open waits per waiting connection (a connection with none is absent). */
    const openCountsByWaiter = spanned("Waits.openCountsByWaiter", (userId: string): Effect.Effect<ReadonlyMap<string, number>> =>
      openByWaiter({ userId }).pipe(
        Effect.map((rows) => new Map(rows.map(([waiter, n]) => [String(waiter), Number(n)]))),
        Effect.orDie
      ))

    return {
      declare,
      cancel,
      sweep,
      signals,
      signalsAfter,
      flags,
      countOpen,
      openCountsByWaiter,
      openExpr,
      undeliveredExpr,
      graph,
      countOpenExpr,
      countOrphaned,
      onPostLanded,
      onConnectionRevoked
    } as const
  })
}) {}
