/**
 * Revocation ends a running `execute_code` (issue 28): every inner call made after the revocation is refused
 * `unauthenticated`, the run ends at once (its child killed), and nothing of that connection is written
 * after `revoked_at` — checked twice: by the rows' timestamps, and by a probe subscribed inside every write
 * (on SQLite the write transactions are serialized, so a post or an append whose transaction runs after the
 * revocation's sees the probe's mark). The real app over SQLite, real connections, real isolated-vm children.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Layer, Schema } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { allToolSets, makeCore, type ServicesLive } from "../src/layers/App.js"
import { SqliteLive } from "../src/layers/Sql.js"
import type { CallOutcome } from "../src/mcp/Dispatch.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { APPEND_ONLY, defineTool, READ_ONLY, ToolRegistry } from "../src/mcp/Registry.js"
import { Auth } from "../src/services/Auth.js"
import { Events } from "../src/services/Events.js"
import { Sandbox } from "../src/services/Sandbox.js"
import { makeHostCalls } from "../src/services/sandbox/HostCalls.js"
import type { Child } from "../src/sandbox/Child.js"
import { connect } from "./support/Fixtures.js"

const probe = { writes: 0 }
const probeTools = Effect.gen(function*() {
  const auth = yield* Auth
  return [
    defineTool({
      name: "sophia.probe_write",
      group: "test",
      access: "coordinate",
      description: "test: counts its calls",
      annotations: APPEND_ONLY,
      input: Schema.Struct({}),
      output: Schema.Struct({ writes: Schema.Number }),
      handler: () => Effect.sync(() => ({ writes: ++probe.writes }))
    }),
    defineTool({
      name: "sophia.slow_read",
      group: "test",
      access: "read",
      description: "test: answers after ms",
      annotations: READ_ONLY,
      input: Schema.Struct({ ms: Schema.Number }),
      output: Schema.Struct({ ok: Schema.Boolean }),
      handler: ({ ms }) => Effect.as(Effect.sleep(ms), { ok: true })
    }),
    defineTool({
      name: "sophia.probe_revoke_me",
      group: "test",
      access: "read",
      description: "test: revokes the calling connection (as the owner would, from the CLI)",
      annotations: READ_ONLY,
      input: Schema.Struct({ user: Schema.String }),
      output: Schema.Struct({ revoked_at: Schema.String }),
      // (in a fiber of its own, as the CLI's would be: not one of the run's calls, which the revocation interrupts)
      handler: ({ user }, context) =>
        Effect.forkDaemon(Effect.orDie(auth.revoke(context.caller.connectionId, user))).pipe(
          Effect.flatMap(Fiber.join),
          Effect.map((info) => ({ revoked_at: info.revoked_at! }))
        )
    })
  ]
})

/** Two children, both warm: one user may hold one of them (the other is kept for the other users). */
const TestApp = makeCore(
  SqliteLive(":memory:"),
  ToolRegistry.fromToolSets<Layer.Layer.Success<typeof ServicesLive>>(...allToolSets, probeTools)
).pipe(
  Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(
    new Map([["SOPHIA_SANDBOX_MAX_CHILDREN", "2"], ["SOPHIA_SANDBOX_POOL_SIZE", "2"]])
  )))
)

const exec = (caller: Caller, code: string, timeout_ms = 30_000) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.execute_code", { code, timeout_ms }))
const ok = (outcome: CallOutcome): any => {
  assert.isTrue(outcome.ok, JSON.stringify(outcome.body))
  return outcome.body
}
const refused = (outcome: CallOutcome): any => {
  assert.isFalse(outcome.ok, JSON.stringify(outcome.body))
  return (outcome.body as any).error
}
const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

let users = 0
const freshUser = () => {
  const user = `revoked-user-${++users}`
  return Effect.map(connect(`runner-${users}`, "full", user), (c) => ({ caller: c.caller, user }))
}

/**
 * The probe inside every write: revocations seen (inside the revoking transaction), and any post or append
 * by a revoked connection whose transaction ran after its revocation's.
 */
const late: Array<string> = []
const seenRevoked = new Set<string>()
const probeWrites = Effect.gen(function*() {
  const events = yield* Events
  yield* events.subscribe({
    on: "ConnectionRevoked",
    name: "test.seenRevoked",
    policy: "atomic",
    handle: (e) => Effect.sync(() => seenRevoked.add(e.connection_id))
  })
  yield* events.subscribe({
    on: "PostLanded",
    name: "test.latePost",
    policy: "atomic",
    handle: (e) => Effect.sync(() => seenRevoked.has(e.author) && late.push(`post ${e.post_id}`))
  })
  yield* events.subscribe({
    on: "LedgerAppended",
    name: "test.lateAppend",
    policy: "atomic",
    handle: (e) => Effect.sync(() => e.work_id.startsWith("rv-") && seenRevoked.size > 0 && late.push(`append ${e.work_id}`))
  })
})
let probing = false

/** Every post and ledger event of `connectionId`, with its timestamp. */
const writesOf = (connectionId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const posts = yield* sql<{ created_at: string }>`SELECT created_at FROM posts WHERE connection_id = ${connectionId}`
    const events = yield* sql<{ at: string }>`SELECT at FROM ledger_events WHERE actor = ${connectionId}`
    return [...posts.map((p) => p.created_at), ...events.map((e) => e.at)]
  }).pipe(Effect.orDie)

const revokedAtOf = (connectionId: string) =>
  Effect.map(Effect.flatMap(Auth, (auth) => auth.get(connectionId)), (info) => info._tag === "Some" ? info.value.revoked_at : null)

layer(TestApp, { timeout: 120_000, excludeTestServices: true })("execute_code and revocation", (it) => {
  it.effect("revoked in the middle of a burst of writes: the run ends unauthenticated and nothing of it is written after revoked_at", () =>
    Effect.gen(function*() {
      if (!probing) yield* probeWrites
      probing = true
      const { caller, user } = yield* freshUser()
      const sql = yield* SqlClient.SqlClient
      yield* Effect.flatMap(Sandbox, (s) => s.warmUp)
      // the store is held a while (another writer's long transaction): the revocation queues for it first,
      // then the run's burst of writes behind it — calls already made, in flight, when the revocation lands
      const holder = yield* Effect.fork(Effect.orDie(sql.withTransaction(Effect.sleep(1500))))
      const outcome = yield* exec(caller, `
        // the revocation first (it queues for the held store), then the burst behind it
        const calls: Promise<unknown>[] = [sophia.probeRevokeMe({ user: ${JSON.stringify(user)} })]
        await sophia.slowRead({ ms: 300 })
        for (let i = 0; i < 37; i++) calls.push(sophia.coordinationPost({ channel: "burst", kind: "status", body: "post " + i }))
        for (let i = 0; i < 10; i++) calls.push(sophia.ledgerAppend({ work_id: "rv-" + i, expected_head: null, events: [{ type: "opened", title: "t" }] }))
        await Promise.allSettled(calls)
        return "finished"
      `)
      yield* Fiber.join(holder)
      assert.strictEqual(refused(outcome).code, "unauthenticated")
      const revokedAt = yield* revokedAtOf(caller.connectionId)
      assert.isString(revokedAt)
      assert.deepStrictEqual(late, [])
      const written = yield* writesOf(caller.connectionId)
      for (const at of written) assert.isTrue(at <= revokedAt!, `${at} after ${revokedAt}`)
      // the burst was cut: what had not been written when the revocation landed never was
      assert.isBelow(written.length, 47)
    }))

  it.effect("revoked from outside while it runs: it ends long before its deadline, its child is killed, nothing is written after", () =>
    Effect.gen(function*() {
      if (!probing) yield* probeWrites
      probing = true
      const { caller, user } = yield* freshUser()
      const sandbox = yield* Sandbox
      const run = yield* Effect.fork(exec(caller, `
        for (let i = 0; i < 24; i++) {
          await sophia.coordinationPost({ channel: "paced", kind: "status", body: "post " + i })
          await sophia.slowRead({ ms: 100 })
        }
        return "finished"
      `))
      // a few posts in, revoke it (as the CLI or the portal would)
      for (let i = 0; i < 1500 && (yield* writesOf(caller.connectionId)).length < 3; i++) yield* Effect.sleep(20)
      const pids = yield* sandbox.pids
      const revokedWhen = Date.now()
      yield* Effect.flatMap(Auth, (auth) => auth.revoke(caller.connectionId, user))
      const outcome = yield* Fiber.join(run)
      const endedIn = Date.now() - revokedWhen
      assert.strictEqual(refused(outcome).code, "unauthenticated")
      // promptly: well within what was left of its 30 s (24 × 100 ms of pacing alone would take 2.4 s more)
      assert.isBelow(endedIn, 10_000)
      const written = yield* writesOf(caller.connectionId)
      assert.isAtLeast(written.length, 3)
      assert.isBelow(written.length, 24)
      const revokedAt = yield* revokedAtOf(caller.connectionId)
      for (const at of written) assert.isTrue(at <= revokedAt!, `${at} after ${revokedAt}`)
      assert.deepStrictEqual(late, [])
      // the child that ran it was killed (the idle one lives on)
      yield* Effect.sleep(200)
      assert.isTrue(pids.some((pid) => !alive(pid)), "a child was killed")
      // the pool serves the others as before
      const other = yield* freshUser()
      assert.strictEqual(ok(yield* exec(other.caller, `return 7`)).result, 7)
    }))

  it.effect("a run still waiting for a free child when its connection is revoked ends unauthenticated and never starts", () =>
    Effect.gen(function*() {
      const sandbox = yield* Sandbox
      yield* sandbox.warmUp
      // both children busy (one user may hold one of the two: two users)
      const p = yield* freshUser()
      const q = yield* freshUser()
      const holders = [
        yield* Effect.fork(exec(p.caller, `await sophia.slowRead({ ms: 4000 }); return 1`)),
        yield* Effect.fork(exec(q.caller, `await sophia.slowRead({ ms: 4000 }); return 1`))
      ]
      for (let i = 0; i < 1500 && (yield* sandbox.load).running < 2; i++) yield* Effect.sleep(20)
      const r = yield* freshUser()
      const before = probe.writes
      const queued = yield* Effect.fork(exec(r.caller, `await sophia.probeWrite({}); return "ran"`))
      for (let i = 0; i < 1500 && (yield* sandbox.load).queued < 1; i++) yield* Effect.sleep(20)
      yield* Effect.flatMap(Auth, (auth) => auth.revoke(r.caller.connectionId, r.user))
      assert.strictEqual(refused(yield* Fiber.join(queued)).code, "unauthenticated")
      // it left the queue, and the holders still hold the pool: it ended on the revocation, not on a free child
      assert.strictEqual((yield* sandbox.load).queued, 0)
      for (const h of holders) assert.strictEqual((yield* Fiber.poll(h))._tag, "None")
      for (const h of holders) ok(yield* Fiber.join(h))
      assert.strictEqual(probe.writes, before)
    }))
})

describe("an inner call of a revoked connection", () => {
  it.scoped("is refused unauthenticated and never made", () =>
    Effect.gen(function*() {
      const sent: Array<any> = []
      const child = {
        pid: -1,
        runs: 0,
        dead: false,
        faulted: false,
        stderr: "",
        sink: undefined,
        proc: { connected: true, send: (m: unknown, cb?: (e: Error | null) => void) => (sent.push(m), cb?.(null), true) }
      } as unknown as Child
      let invoked = 0
      const host = { methods: new Map([["orient", "sophia.orient"]]), invoke: () => Effect.sync(() => (invoked++, { ok: true as const, body: {} })) }
      let revoked = false
      const guard = { calls: new Set<Fiber.RuntimeFiber<unknown, unknown>>(), isRevoked: () => revoked }
      const calls = yield* makeHostCalls(child, 1, host, guard)
      calls.inFlight(1)
      yield* calls.start({ call: 1, method: "orient", args: "{}" })
      for (let i = 0; i < 50 && sent.length < 1; i++) yield* Effect.sleep(5)
      assert.strictEqual(invoked, 1)
      revoked = true
      calls.inFlight(1)
      yield* calls.start({ call: 2, method: "orient", args: "{}" })
      for (let i = 0; i < 50 && sent.length < 2; i++) yield* Effect.sleep(5)
      assert.strictEqual(invoked, 1, "the call was not made")
      assert.strictEqual(calls.refused.get(2)?.code, "unauthenticated")
      const answer = JSON.parse(sent[1].batch)[0]
      assert.deepStrictEqual([answer[0], answer[1], answer[2].code], [2, 0, "unauthenticated"])
      assert.include(answer[2].message, "revoked")
      // the calls in flight are listed for the revocation to interrupt, and leave the list once done
      assert.strictEqual(guard.calls.size, 0)
    }))
})
