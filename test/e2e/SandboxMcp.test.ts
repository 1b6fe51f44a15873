import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Fiber, Layer } from "effect"
import { SophiaTest } from "../../src/layers/App.js"
import * as Http from "../../src/mcp/Http.js"
import { Auth } from "../../src/services/Auth.js"
import { connect } from "../support/Fixtures.js"

/** The real Streamable HTTP transport on a free loopback port over the in-memory app (SandboxTest inside). */
const Served = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(Layer.provideMerge(SophiaTest))

const client = (url: string, bearer: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const c = new Client({ name: "sandbox-e2e", version: "1.0.0" })
      await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } }))
      return c
    }),
    (c) => Effect.promise(() => c.close().catch(() => undefined))
  )

const call = (c: Client, code: string, timeout_ms?: number) =>
  Effect.promise(() =>
    c.callTool({ name: "sophia_execute_code", arguments: timeout_ms === undefined ? { code } : { code, timeout_ms } }, undefined, {
      timeout: 60_000
    })
  )

const errorOf = (result: any) => JSON.parse(result.content[0].text).error

describe("sophia.execute_code over MCP (real HTTP transport, real SDK client)", { timeout: 60_000 }, () => {
  it.scoped("the seed's shape: three composed reads in Promise.all, one round trip", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* Http.HttpServer
      const { bearer, caller } = yield* connect("composer", "full")
      const c = yield* client(mcpUrl, bearer)
      const { tools } = yield* Effect.promise(() => c.listTools())
      const listed = tools.find((t) => t.name === "sophia_execute_code")
      assert.isDefined(listed)
      assert.include(listed!.description, "3+ Sophia reads")
      const result = yield* call(c, `
        const [briefing, catalog, inbox] = await Promise.all([
          sophia.orient({ goal: "draft mcp-surface page" }),
          sophia.capabilityCatalog({ brief: true }),
          sophia.coordinationInbox({ limit: 3, compact: true }),
        ])
        return { me: briefing.connection_id, goal: briefing.goal, total_tools: catalog.total_tools, unread: inbox.unread_count }
      `)
      assert.isNotTrue(result.isError, JSON.stringify(result.content))
      const body = result.structuredContent as any
      assert.strictEqual(body.sophia_calls, 3)
      assert.strictEqual(body.result.me, caller.connectionId)
      assert.strictEqual(body.result.goal, "draft mcp-surface page")
      assert.strictEqual(body.result.total_tools, tools.length)
      assert.strictEqual(body.result.unread, 0)
      assert.isNumber(body.execution_time_ms)
      assert.isNumber(body._inbox_unread)
      assert.deepStrictEqual(JSON.parse((result.content as any)[0].text), body)
    }).pipe(Effect.provide(Served)))

  it.scoped("an observer's snippet cannot write, and an uncaught refusal keeps its code over the wire", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* Http.HttpServer
      const { bearer } = yield* connect("watcher", "observer")
      const { bearer: writerBearer } = yield* connect("writer", "full")
      const observer = yield* client(mcpUrl, bearer)
      const refused = yield* call(observer, `
        await sophia.coordinationPost({ channel: "general", kind: "status", body: "from the sandbox" })
        return "wrote"
      `)
      assert.isTrue(refused.isError)
      assert.strictEqual(errorOf(refused).code, "forbidden_profile")
      // nothing was written: a full connection sees no post in the channel
      const writer = yield* client(mcpUrl, writerBearer)
      const seen = yield* call(writer, `return (await sophia.coordinationInbox({ peek: true })).posts.length`)
      assert.isNotTrue(seen.isError, JSON.stringify(seen.content))
      assert.strictEqual((seen.structuredContent as any).result, 0)
      // a fault in one run leaves the daemon serving
      const bomb = yield* call(writer, `const a: unknown[] = []; while (true) a.push({ x: Math.random() })`)
      assert.strictEqual(errorOf(bomb).code, "sandbox_memory_limit")
      const after = yield* call(writer, `return (await sophia.orient({})).name`)
      assert.strictEqual((after.structuredContent as any).result, "writer")
    }).pipe(Effect.provide(Served)))

  it.scopedLive("a third concurrent run is refused rate_limited over the wire; revoking the connection ends its runs in flight", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* Http.HttpServer
      const { bearer } = yield* connect("looper", "full", "looping-user")
      const c = yield* client(mcpUrl, bearer)
      // two runs that make one call each, then compute until their 20 s deadline
      const loop = `await sophia.orient({}); while (true) {}`
      const running = [yield* Effect.fork(call(c, loop, 20_000)), yield* Effect.fork(call(c, loop, 20_000))]
      let third: any
      for (let i = 0; i < 200; i++) {
        yield* Effect.sleep(50)
        third = yield* call(c, `return 1`)
        if (third.isError) break
      }
      assert.isTrue(third.isError, JSON.stringify(third.content))
      const refusal = errorOf(third)
      assert.strictEqual(refusal.code, "rate_limited")
      assert.strictEqual(refusal.setting, "SOPHIA_SANDBOX_RUNS_PER_CONNECTION")
      assert.isAtLeast(refusal.retry_after_s, 1)
      // the owner revokes it: both runs end now, not at their deadline
      const revoked = Date.now()
      yield* Effect.flatMap(Auth, (auth) => auth.revoke("looper", "looping-user"))
      for (const f of running) {
        const ended = yield* Fiber.join(f)
        assert.isTrue(ended.isError)
        assert.strictEqual(errorOf(ended).code, "unauthenticated")
      }
      assert.isBelow(Date.now() - revoked, 15_000)
    }).pipe(Effect.provide(Served)))
})
