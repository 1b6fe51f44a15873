import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema } from "effect"
import { fileURLToPath } from "node:url"
import type { Caller } from "../src/domain/Auth.js"
import { SANDBOX_CALL_CAP, SANDBOX_DEFAULT_TIMEOUT_MS } from "../src/domain/Sandbox.js"
import { allToolSets, makeCore, type ServicesLive } from "../src/layers/App.js"
import { SqliteLive } from "../src/layers/Sql.js"
import type { CallOutcome } from "../src/mcp/Dispatch.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { APPEND_ONLY, defineTool, READ_ONLY, ToolRegistry } from "../src/mcp/Registry.js"
import { camelMapping, camelName } from "../src/mcp/SdkTypes.js"
import { make as makePool, Sandbox, SandboxTest } from "../src/services/Sandbox.js"
import { connect } from "./support/Fixtures.js"

/** Throwaway tools: a write an observer must not reach, and a read that takes as long as asked. */
const probe = { writes: 0, slowStarted: 0, slowInterrupted: 0 }
const probeTools = Effect.succeed([
  defineTool({
    name: "sophia.probe_write",
    group: "test",
    access: "coordinate",
    description: "test: counts its calls",
    annotations: APPEND_ONLY,
    input: Schema.Struct({ note: Schema.optional(Schema.String) }),
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
    handler: ({ ms }) =>
      Effect.sync(() => probe.slowStarted++).pipe(
        Effect.zipRight(Effect.sleep(ms)),
        Effect.as({ ok: true }),
        Effect.onInterrupt(() => Effect.sync(() => probe.slowInterrupted++))
      )
  })
])

const TestApp = makeCore(
  SqliteLive(":memory:"),
  ToolRegistry.fromToolSets<Layer.Layer.Success<typeof ServicesLive>>(...allToolSets, probeTools)
)

const exec = (caller: Caller, code: string, extra: Record<string, unknown> = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.execute_code", { code, ...extra }))

const ok = (outcome: CallOutcome): any => {
  assert.isTrue(outcome.ok, JSON.stringify(outcome.body))
  return outcome.body
}
const refused = (outcome: CallOutcome): any => {
  assert.isFalse(outcome.ok, JSON.stringify(outcome.body))
  return (outcome.body as any).error
}

let names = 0
const fresh = (profile: "observer" | "assistant" | "full" = "full", user?: string) =>
  Effect.map(connect(`sandbox-${profile}-${++names}`, profile, user), (c) => c.caller)

layer(SandboxTest, { excludeTestServices: true })("Sandbox service (SandboxTest: real isolates, pool of one)", (it) => {
  it.effect("the deadline bounds a run whose host never answers, and cancels the pending call", () =>
    Effect.gen(function*() {
      const sandbox = yield* Sandbox
      let interrupted = 0
      const host = {
        methods: new Map([["hang", "sophia.hang"]]),
        invoke: () => Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => interrupted++)))
      }
      const err = yield* Effect.flip(sandbox.run({ code: "await sophia.hang({}); return 1", timeout_ms: 300 }, host))
      assert.strictEqual(err._tag, "SandboxTimeout")
      assert.strictEqual(interrupted, 1)
      const out = yield* sandbox.run({ code: "return [1, 2].map((x: number) => x * 2)" }, host)
      assert.deepStrictEqual(out.result, [2, 4])
      assert.strictEqual(out.sophia_calls, 0)
    }))
})

/** A cold pool (no child until the first run) whose children must accept a run within 500 ms. */
const ColdPool = Layer.scoped(Sandbox, makePool({ warm: 1, max: 1, runsPerChild: 200, prewarm: false, abortGraceMs: 1000, acceptTimeoutMs: 500 }))
/** A cold pool whose children take 700 ms to start (a preload blocks them): slower than a 300 ms deadline. */
const SLOW_START = fileURLToPath(new URL("./fixtures/slow-start.cjs", import.meta.url))
const SlowColdPool = Layer.scoped(
  Sandbox,
  makePool({ warm: 1, max: 1, runsPerChild: 200, prewarm: false, abortGraceMs: 1000, acceptTimeoutMs: 500, childExecArgv: ["--require", SLOW_START] })
)
const noHost = { methods: new Map<string, string>(), invoke: () => Effect.die("no host calls") }

layer(SlowColdPool, { excludeTestServices: true })("Sandbox deadline (a slow cold start)", (it) => {
  it.effect("a cold start does not count against the deadline: the first run spawns a child and still has its 300 ms", () =>
    Effect.gen(function*() {
      const sandbox = yield* Sandbox
      assert.deepStrictEqual(yield* sandbox.pids, [])
      // the child's start is blocked for 700 ms by its preload: the spawn alone outlasts the deadline
      const started = Date.now()
      const out = yield* sandbox.run({ code: "return 1", timeout_ms: 300 }, noHost)
      assert.strictEqual(out.result, 1)
      assert.isAtLeast(Date.now() - started, 700, "the run includes a spawn slower than its deadline")
    }))
})

layer(ColdPool, { excludeTestServices: true })("Sandbox deadline (starts when the child accepts the run)", (it) => {

  it.effect("a child that never accepts the run is killed at the acceptance bound; the next run works", () =>
    Effect.gen(function*() {
      const sandbox = yield* Sandbox
      assert.strictEqual((yield* sandbox.run({ code: "return 0" }, noHost)).result, 0)
      const pids = yield* sandbox.pids
      assert.strictEqual(pids.length, 1)
      process.kill(pids[0], "SIGSTOP")
      const err = yield* Effect.flip(sandbox.run({ code: "return 1", timeout_ms: 30_000 }, noHost))
      assert.strictEqual(err._tag, "SandboxError")
      assert.include(err.message, "did not accept the run within 500 ms")
      yield* Effect.sleep(100)
      assert.throws(() => process.kill(pids[0], 0), /ESRCH/)
      assert.strictEqual((yield* sandbox.run({ code: "return 2" }, noHost)).result, 2)
      assert.notInclude(yield* sandbox.pids, pids[0])
    }))
})

describe("sandbox mapping (pure)", () => {
  it("maps every canonical name to a camelCase method and back", () => {
    const names = ["sophia.orient", "sophia.query_knowledge", "sophia.coordination_post", "sophia.get_sdk_types"]
    const mapping = camelMapping(names)
    assert.deepStrictEqual([...mapping.keys()], ["orient", "queryKnowledge", "coordinationPost", "getSdkTypes"])
    for (const name of names) assert.strictEqual(mapping.get(camelName(name)), name)
  })
})

layer(TestApp, { timeout: 120_000, excludeTestServices: true })("Sandbox (sophia.execute_code)", (it) => {
  it.effect("composes three reads in Promise.all in one run, as the caller", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const body = ok(yield* exec(caller, `
        const [a, b, c] = await Promise.all([
          sophia.orient({ goal: "one" }),
          sophia.orient({ goal: "two" }),
          sophia.capabilityCatalog({ brief: true }),
        ])
        console.log("got", a.goal, b.goal)
        return { ids: [a.connection_id, b.connection_id], goals: [a.goal, b.goal], tools: c.total_tools, envelope: "_inbox_unread" in a }
      `))
      assert.strictEqual(body.sophia_calls, 3)
      assert.deepStrictEqual(body.result.ids, [caller.connectionId, caller.connectionId])
      assert.deepStrictEqual(body.result.goals, ["one", "two"])
      assert.isAbove(body.result.tools, 3)
      // inner results are the tool bodies without the envelope; the outer reply carries it
      assert.isFalse(body.result.envelope)
      assert.isNumber(body._inbox_unread)
      assert.deepStrictEqual(body.logs, ["got one two"])
      assert.isNumber(body.execution_time_ms)
    }))

  it.effect("the camelCase mapping covers every registry tool (reflection, no hand-kept list)", () =>
    Effect.gen(function*() {
      const caller = yield* fresh("observer")
      const dispatcher = yield* Dispatcher
      const expected = dispatcher.registry.tools.map((t) => camelName(t.name)).sort()
      const listed = ok(yield* exec(caller, `return Object.keys(sophia).map((k) => [k, typeof sophia[k], k in sophia])`))
      assert.deepStrictEqual(listed.result.map((r: Array<unknown>) => r[0]).sort(), expected)
      for (const [k, type, has] of listed.result) assert.isTrue(type === "function" && has === true, k)
      // every method reaches its tool (never "no such method"), in batches under the call cap
      const methods = expected.filter((m) => m !== "executeCode")
      for (let i = 0; i < methods.length; i += 40) {
        const batch = methods.slice(i, i + 40)
        const out = ok(yield* exec(caller, `
          const out: Record<string, string> = {}
          for (const m of ${JSON.stringify(batch)}) {
            try { await (sophia as any)[m]({}); out[m] = "ok" } catch (e: any) { out[m] = e.details?.what === "method" ? "unmapped" : e.code }
          }
          return out
        `))
        for (const m of batch) assert.notStrictEqual(out.result[m], "unmapped", m)
        assert.strictEqual(out.sophia_calls, batch.length)
      }
    }))

  it.effect("an unknown method fails naming the nearest valid ones; then and symbol keys are undefined", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const body = ok(yield* exec(caller, `
        const s: any = sophia
        const awaited = await s
        let err: any
        try { await s.orientt({}) } catch (e) { err = e }
        return { then: typeof s.then, sym: typeof s[Symbol.iterator], tag: typeof s[Symbol.toStringTag],
          same: awaited === sophia, code: err.code, message: err.message, suggestions: err.details.suggestions }
      `))
      assert.strictEqual(body.result.then, "undefined")
      assert.strictEqual(body.result.sym, "undefined")
      assert.strictEqual(body.result.tag, "undefined")
      assert.isTrue(body.result.same)
      assert.strictEqual(body.result.code, "not_found")
      assert.include(body.result.suggestions, "orient")
      assert.include(body.result.message, "sophia.orient")
      // uncaught, it is the tool's own refusal with the same code
      const err = refused(yield* exec(caller, `return await (sophia as any).capabilityCatalogue({})`))
      assert.strictEqual(err.code, "not_found")
      assert.include(err.suggestions, "capabilityCatalog")
    }))

  it.effect("an uncaught inner refusal becomes execute_code's refusal with the same code; caught, it is an Error with .code", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const err = refused(yield* exec(caller, `await sophia.orient({ goal: 42 }); return "unreached"`))
      assert.strictEqual(err.code, "validation_error")
      assert.include(err.message, "sophia.orient")
      const caught = ok(yield* exec(caller, `
        try { await sophia.orient({ goal: 42 }) } catch (e: any) { return { code: e.code, name: e.name, tool: e.tool, isError: e instanceof Error } }
      `))
      assert.deepStrictEqual(caught.result, { code: "validation_error", name: "SophiaError", tool: "sophia.orient", isError: true })
      // the snippet cannot forge a pass-through: a fabricated .code is just an error of the snippet
      const forged = refused(yield* exec(caller, `const e: any = new Error("fake"); e.code = "head_moved"; throw e`))
      assert.strictEqual(forged.code, "sandbox_error")
    }))

  it.effect("the call cap is exactly 50, enforced on the host", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const fifty = ok(yield* exec(caller, `for (let i = 0; i < ${SANDBOX_CALL_CAP}; i++) await sophia.orient({}); return "done"`))
      assert.strictEqual(fifty.sophia_calls, SANDBOX_CALL_CAP)
      assert.strictEqual(fifty.result, "done")
      const over = refused(
        yield* exec(caller, `
        let n = 0
        try { for (let i = 0; i < ${SANDBOX_CALL_CAP + 1}; i++) { await sophia.orient({}); n++ } } catch (e) { return "caught after " + n }
        return "all " + n
      `)
      )
      assert.strictEqual(over.code, "sandbox_call_cap")
      assert.strictEqual(over.limit, SANDBOX_CALL_CAP)
      // and in parallel: 60 at once still stops at the cap
      const burst = refused(yield* exec(caller, `await Promise.all(Array.from({ length: 60 }, () => sophia.orient({}))); return 1`))
      assert.strictEqual(burst.code, "sandbox_call_cap")
      ok(yield* exec(caller, `return 1`))
    }))

  it.effect("while(true){} stops at the default deadline, and the next run works", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const started = Date.now()
      const err = refused(yield* exec(caller, `while (true) {}`))
      const elapsed = Date.now() - started
      assert.strictEqual(err.code, "sandbox_timeout")
      assert.strictEqual(err.timeout_ms, SANDBOX_DEFAULT_TIMEOUT_MS)
      assert.isAtLeast(elapsed, SANDBOX_DEFAULT_TIMEOUT_MS - 50)
      assert.isBelow(elapsed, SANDBOX_DEFAULT_TIMEOUT_MS + 4000)
      assert.strictEqual(ok(yield* exec(caller, `return 2`)).result, 2)
    }), { timeout: 60_000 })

  it.effect("an explicit timeout_ms bounds a snippet that only awaits slow host calls", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const before = { ...probe }
      const started = Date.now()
      const err = refused(yield* exec(caller, `console.log("waiting"); await sophia.slowRead({ ms: 20000 }); return 1`, { timeout_ms: 400 }))
      const elapsed = Date.now() - started
      assert.strictEqual(err.code, "sandbox_timeout")
      assert.strictEqual(err.timeout_ms, 400)
      assert.deepStrictEqual(err.logs, ["waiting"])
      assert.isBelow(elapsed, 3000)
      assert.strictEqual(probe.slowStarted, before.slowStarted + 1)
      // the host call in flight was cancelled with the run
      assert.strictEqual(probe.slowInterrupted, before.slowInterrupted + 1)
      // a CPU loop at an explicit value too
      const loop = refused(yield* exec(caller, `for (;;) {}`, { timeout_ms: 300 }))
      assert.strictEqual(loop.code, "sandbox_timeout")
      assert.strictEqual(ok(yield* exec(caller, `return 3`)).result, 3)
      // above the 30 s ceiling: refused before anything runs
      assert.strictEqual(refused(yield* exec(caller, `return 1`, { timeout_ms: 30_001 })).code, "validation_error")
    }))

  it.effect("a memory bomb and a 1M-key object are contained; the next run works", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const bomb = refused(yield* exec(caller, `const a: unknown[] = []; while (true) a.push({ x: Math.random(), s: "y" + Math.random() })`))
      assert.strictEqual(bomb.code, "sandbox_memory_limit")
      assert.strictEqual(ok(yield* exec(caller, `return "after bomb"`)).result, "after bomb")
      const keys = refused(yield* exec(caller, `const o: Record<string, number> = {}; for (let i = 0; i < 1e6; i++) o["k" + i] = i; return o`))
      assert.strictEqual(keys.code, "sandbox_memory_limit")
      assert.strictEqual(ok(yield* exec(caller, `return "after keys"`)).result, "after keys")
      const buffer = refused(yield* exec(caller, `return new ArrayBuffer(1e9).byteLength`))
      assert.oneOf(buffer.code, ["sandbox_error", "sandbox_memory_limit"])
      const string = refused(yield* exec(caller, `let s = "x"; while (true) s += s; return s.length`))
      assert.oneOf(string.code, ["sandbox_error", "sandbox_memory_limit"])
      assert.strictEqual(ok(yield* exec(caller, `return "still fine"`)).result, "still fine")
    }))

  it.effect("escape attempts reach nothing of the host", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const body = ok(yield* exec(caller, `
        const g: any = globalThis
        let dynamicImport: string
        try { await import("node:fs"); dynamicImport = "imported" } catch (e: any) { dynamicImport = "threw" }
        return {
          process: typeof process, require: typeof require, module: typeof module, Buffer: typeof Buffer,
          fetch: typeof fetch, setTimeout: typeof setTimeout, setInterval: typeof setInterval, queueMicrotask: typeof g.queueMicrotask,
          viaConstructorValue: g.constructor.constructor("return typeof process")(),
          viaFunction: Function("return typeof require")(),
          viaFunctionGlobal: Function("return this")() === globalThis,
          viaSophia: (sophia as any).constructor.constructor("return typeof process")(),
          viaMethod: (sophia as any).orient.constructor("return typeof require + typeof process")(),
          sophiaProto: Object.getPrototypeOf(sophia),
          viaError: (() => { try { null!.x } catch (e: any) { return e.constructor.constructor("return typeof process")() } })(),
          dynamicImport,
          globals: Object.getOwnPropertyNames(globalThis).filter((n) => /ivm|isolated|__|host|_ref/i.test(n)),
        }
      `))
      const r = body.result
      for (const key of ["process", "require", "module", "Buffer", "fetch", "setTimeout", "setInterval", "queueMicrotask"]) {
        assert.strictEqual(r[key], "undefined", key)
      }
      assert.strictEqual(r.viaConstructorValue, "undefined")
      assert.strictEqual(r.viaFunction, "undefined")
      assert.strictEqual(r.viaError, "undefined")
      assert.isTrue(r.viaFunctionGlobal)
      assert.strictEqual(r.viaSophia, "undefined")
      assert.strictEqual(r.viaMethod, "undefinedundefined")
      assert.isNull(r.sophiaProto)
      assert.strictEqual(r.dynamicImport, "threw")
      // only the snippet's own function is left on the global; no bridge handle
      assert.deepStrictEqual(r.globals, ["__sophia_snippet__"])
    }))

  it.effect("prototype pollution through returned values or arguments does not reach the host", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const body = ok(yield* exec(caller, `
        ;(Object.prototype as any).polluted = "yes"
        const evil = JSON.parse('{"__proto__": {"polluted": "yes"}, "constructor": {"prototype": {"polluted": "yes"}}}')
        // keys orient does not define ("__proto__", "constructor") are refused, never merged anywhere
        const first = await sophia.orient({ goal: "x", ...evil } as any).then(() => "ran", (e: any) => e.code)
        const second = await sophia.orient(JSON.parse('{"__proto__": {"isAdmin": true}}')).then(() => "ran", (e: any) => e.code)
        return { evil, refused: [first, second] }
      `))
      assert.isUndefined(({} as any).polluted)
      assert.isUndefined(({} as any).isAdmin)
      assert.isUndefined((Object.prototype as any).polluted)
      // the returned "__proto__" is plain data, not a prototype
      assert.strictEqual(Object.getPrototypeOf(body.result.evil), Object.prototype)
      assert.isUndefined(body.result.evil.polluted)
      assert.deepStrictEqual(body.result.refused, ["validation_error", "validation_error"])
      assert.strictEqual(body.sophia_calls, 2)
    }))

  it.effect("an observer's snippet cannot write: the inner call is refused by the profile rules and never runs", () =>
    Effect.gen(function*() {
      const observer = yield* fresh("observer")
      const before = probe.writes
      const err = refused(yield* exec(observer, `return await sophia.probeWrite({ note: "x" })`))
      assert.strictEqual(err.code, "forbidden_profile")
      const caught = ok(yield* exec(observer, `try { await sophia.probeWrite({}) } catch (e: any) { return e.code }`))
      assert.strictEqual(caught.result, "forbidden_profile")
      assert.strictEqual(probe.writes, before)
      // the same snippet from a full connection does write: the rule is the profile's, not the sandbox's
      const writer = yield* fresh("full")
      ok(yield* exec(writer, `return await sophia.probeWrite({})`))
      assert.strictEqual(probe.writes, before + 1)
    }))

  it.effect("execute_code cannot be nested", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const err = refused(yield* exec(caller, `return await sophia.executeCode({ code: "return 1" })`))
      assert.strictEqual(err.code, "sandbox_error")
      assert.include(err.message, "nested")
    }))

  it.effect("a crash of the child process is survived", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const sandbox = yield* Sandbox
      // one call first: a run that already had effects is never re-run, so its death is reported
      const fiber = yield* Effect.fork(exec(caller, `await sophia.orient({}); while (true) {}`, { timeout_ms: 20_000 }))
      yield* Effect.sleep(700)
      const pids = yield* sandbox.pids
      assert.isAbove(pids.length, 0)
      for (const pid of pids) process.kill(pid, "SIGKILL")
      const err = refused(yield* Fiber.join(fiber))
      assert.strictEqual(err.code, "sandbox_error")
      assert.include(err.message, "died")
      assert.strictEqual(err.process_died, true)
      assert.strictEqual(ok(yield* exec(caller, `return "alive"`)).result, "alive")
      const after = yield* sandbox.pids
      for (const pid of after) assert.notInclude(pids, pid)
    }))

  it.effect("a run whose process dies before it made any call is run once more on a fresh child", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const sandbox = yield* Sandbox
      const fiber = yield* Effect.fork(exec(caller, `const t = Date.now(); while (Date.now() - t < 1500) {} ; return "finished"`))
      yield* Effect.sleep(500)
      for (const pid of yield* sandbox.pids) process.kill(pid, "SIGKILL")
      assert.strictEqual(ok(yield* Fiber.join(fiber)).result, "finished")
    }))

  it.effect("the watchdog SIGKILLs a child that stops answering; the next run works", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const sandbox = yield* Sandbox
      ok(yield* exec(caller, `return 0`))
      // the deadline starts when the child accepts the run: freeze it well after acceptance, well before the deadline
      const fiber = yield* Effect.fork(exec(caller, `while (true) {}`, { timeout_ms: 2500 }))
      yield* Effect.sleep(1000)
      const pids = yield* sandbox.pids
      // a frozen child cannot confirm the abort at the deadline
      for (const pid of pids) process.kill(pid, "SIGSTOP")
      const started = Date.now()
      const err = refused(yield* Fiber.join(fiber))
      assert.strictEqual(err.code, "sandbox_timeout")
      assert.isBelow(Date.now() - started, 5000)
      yield* Effect.sleep(100)
      const alive = (pid: number) => {
        try {
          process.kill(pid, 0)
          return true
        } catch {
          return false
        }
      }
      const frozenLeft = pids.filter(alive)
      // the running child was killed; an idle frozen one (if any) is thawed so the pool can recycle it
      assert.isBelow(frozenLeft.length, pids.length)
      for (const pid of frozenLeft) process.kill(pid, "SIGCONT")
      assert.strictEqual(ok(yield* exec(caller, `return "after watchdog"`)).result, "after watchdog")
    }))

  it.effect("concurrent runs from two connections see only their own identities", () =>
    Effect.gen(function*() {
      const alice = yield* fresh("full", "alice-user")
      const bob = yield* fresh("observer", "bob-user")
      const snippet = `
        const who = await Promise.all(Array.from({ length: 5 }, () => sophia.orient({})))
        await sophia.slowRead({ ms: 200 })
        const again = await sophia.orient({})
        return [...who, again].map((o) => o.connection_id + "/" + o.user_id)
      `
      const [a, b] = yield* Effect.all([exec(alice, snippet), exec(bob, snippet)], { concurrency: 2 })
      for (const id of ok(a).result) assert.strictEqual(id, `${alice.connectionId}/${alice.userId}`)
      for (const id of ok(b).result) assert.strictEqual(id, `${bob.connectionId}/${bob.userId}`)
    }))

  it.effect("agent errors carry a stack mapped to the snippet's own lines", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      const err = refused(yield* exec(caller, [
        "interface Point { x: number; y: number }",
        "const p: Point = { x: 1, y: 2 }",
        "type Unused = string",
        "const boom = (q: Point): number => { throw new TypeError(`bad point ${q.x}`) }",
        "return boom(p)"
      ].join("\n")))
      assert.strictEqual(err.code, "sandbox_error")
      assert.strictEqual(err.error_name, "TypeError")
      assert.strictEqual(err.message, "bad point 1")
      assert.match(err.agent_stack, /snippet\.ts:4:\d+/)
      assert.match(err.agent_stack, /snippet\.ts:5:\d+/)
      assert.notInclude(err.agent_stack, "sophia-runtime")
      const syntax = refused(yield* exec(caller, "const a = 1\nconst b = (\nreturn a"))
      assert.strictEqual(syntax.code, "sandbox_error")
      assert.match(syntax.message, /snippet\.ts:3:/)
    }))

  it.effect("results are plain JSON; console output is bounded", () =>
    Effect.gen(function*() {
      const caller = yield* fresh()
      assert.isNull(ok(yield* exec(caller, `const x = 1`)).result)
      assert.deepStrictEqual(ok(yield* exec(caller, `return { d: new Date(0), f: () => 1, n: [1, "a", null] }`)).result, {
        d: "1970-01-01T00:00:00.000Z",
        n: [1, "a", null]
      })
      assert.strictEqual(refused(yield* exec(caller, `return 10n`)).code, "sandbox_error")
      const logs = ok(yield* exec(caller, `for (let i = 0; i < 1000; i++) console.log("line", i, "x".repeat(5000)); return 1`)).logs
      assert.isAtMost(logs.length, 101)
      for (const line of logs) assert.isAtMost(line.length, 1002)
    }))
})
