import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as http from "node:http"
import { HttpServer } from "../../src/mcp/Http.js"
import { Auth } from "../../src/services/Auth.js"
import { connect } from "../support/Fixtures.js"
import { mcpClient, ServeTest, textJson } from "../support/Serve.js"

const AUTH_MESSAGE = "Authentication required. Provide a valid Bearer token."

/** A raw HTTP request (fetch would refuse to send some of the hostile headers we need). */
const request = (
  port: number,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string | Buffer }
) =>
  Effect.async<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resume) => {
    const req = http.request(
      { host: "127.0.0.1", port, method: options.method ?? "POST", path: options.path, headers: options.headers },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (c) => chunks.push(c))
        res.on("end", () =>
          resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }))
        )
      }
    )
    req.on("error", (e) => resume(Effect.die(e)))
    if (options.body !== undefined) req.write(options.body)
    req.end()
  })

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
})
const mcpHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }

describe("HTTP transport", () => {
  it.scoped("refuses a missing, malformed, unknown or revoked bearer with 401 and the exact message, telling the three failures apart", () =>
    Effect.gen(function*() {
      const { port } = yield* HttpServer
      const auth = yield* Auth
      const revoked = yield* connect("soon-revoked", "full")
      yield* auth.revoke("soon-revoked")
      const cases: Record<string, readonly [Record<string, string>, string]> = {
        missing: [{}, "missing"],
        malformed: [{ authorization: "Basic Zm9vOmJhcg==" }, "malformed"],
        "not a bearer of ours": [{ authorization: "Bearer abc" }, "malformed"],
        unknown: [{ authorization: `Bearer sph_${"x".repeat(43)}` }, "unknown_or_revoked"],
        revoked: [{ authorization: `Bearer ${revoked.bearer}` }, "unknown_or_revoked"]
      }
      const reasons = new Set<string>()
      for (const [label, [headers, reason]] of Object.entries(cases)) {
        const mcp = yield* request(port, { path: "/mcp", headers: { ...mcpHeaders, ...headers }, body: initialize })
        assert.strictEqual(mcp.status, 401, label)
        assert.strictEqual(mcp.headers["www-authenticate"], "Bearer realm=\"sophia\"", label)
        const mcpError = JSON.parse(mcp.body).error
        assert.strictEqual(mcpError.message, AUTH_MESSAGE, label)
        assert.strictEqual(mcpError.data.code, "unauthenticated", label)
        assert.strictEqual(mcpError.data.reason, reason, label)
        const rest = yield* request(port, {
          path: "/api/tools/sophia.orient",
          headers: { "content-type": "application/json", ...headers },
          body: "{}"
        })
        assert.strictEqual(rest.status, 401, label)
        const { error } = JSON.parse(rest.body)
        // shaped like every refusal, and telling the three failures apart
        assert.deepStrictEqual([error.code, error.reason], ["unauthenticated", reason], label)
        assert.isString(error.message, label)
        assert.isString(error.hint, label)
        assert.deepStrictEqual(mcpError.data, error, label)
        reasons.add(error.message)
      }
      assert.strictEqual(reasons.size, 3)
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("GET /api/tools lists the bearer's tools; a wrong method on a tool path is 405 with Allow; an unknown route says where to go", () =>
    Effect.gen(function*() {
      const { port } = yield* HttpServer
      const { bearer } = yield* connect("lister", "observer")
      const auth = { authorization: `Bearer ${bearer}` }
      const listed = yield* request(port, { method: "GET", path: "/api/tools", headers: auth })
      assert.strictEqual(listed.status, 200)
      const groups = JSON.parse(listed.body).groups as Record<string, Array<{ name: string; access: string }>>
      const tools = Object.values(groups).flat()
      assert.isTrue(tools.some((t) => t.name === "sophia.orient"))
      // an observer is listed what it may call: reads only
      assert.deepStrictEqual([...new Set(tools.map((t) => t.access))], ["read"])
      const anonymous = yield* request(port, { method: "GET", path: "/api/tools" })
      assert.strictEqual(anonymous.status, 401)
      assert.strictEqual(JSON.parse(anonymous.body).error.reason, "missing")
      const get = yield* request(port, { method: "GET", path: "/api/tools/sophia.orient", headers: auth })
      assert.strictEqual(get.status, 405)
      assert.strictEqual(get.headers.allow, "POST")
      assert.strictEqual(JSON.parse(get.body).error.code, "method_not_allowed")
      const post = yield* request(port, { method: "POST", path: "/api/tools", headers: auth, body: "{}" })
      assert.strictEqual(post.status, 405)
      assert.strictEqual(post.headers.allow, "GET")
      const nowhere = yield* request(port, { method: "GET", path: "/api/nothing", headers: auth })
      assert.strictEqual(nowhere.status, 404)
      const error = JSON.parse(nowhere.body).error
      assert.deepStrictEqual([error.code, typeof error.hint], ["not_found", "string"])
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("a revoked bearer fails on its very next call inside an open MCP session", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* HttpServer
      const auth = yield* Auth
      const { bearer } = yield* connect("agent", "full")
      const client = yield* mcpClient(mcpUrl, bearer)
      const first = yield* Effect.promise(() => client.callTool({ name: "sophia_orient", arguments: {} }))
      assert.strictEqual((first.structuredContent as any).name, "agent")
      yield* auth.revoke("agent")
      const error = yield* Effect.promise(() =>
        client.callTool({ name: "sophia_orient", arguments: {} }).then(() => undefined, (e: Error) => e)
      )
      assert.isDefined(error)
      assert.include(String(error?.message), AUTH_MESSAGE)
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("speaks MCP with the real SDK client: initialize, tools/list, orient under both spellings", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* HttpServer
      const { bearer, caller } = yield* connect("coordinator", "full")
      const client = yield* mcpClient(mcpUrl, bearer)
      assert.strictEqual(client.getServerVersion()?.name, "sophia")
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.isAbove(tools.length, 0)
      for (const tool of tools) {
        assert.match(tool.name, /^[a-zA-Z0-9_-]{1,64}$/, "advertised names pass strict clients")
        assert.notInclude(JSON.stringify(tool.inputSchema), "$schema")
        assert.notInclude(JSON.stringify(tool.inputSchema), "$ref")
        assert.isDefined(tool.outputSchema, `${tool.name} outputSchema`)
        assert.include(Object.keys(tool.outputSchema?.properties ?? {}), "_inbox_unread")
        for (const hint of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const) {
          assert.isBoolean(tool.annotations?.[hint], `${tool.name} ${hint}`)
        }
      }
      for (const name of ["sophia_orient", "sophia.orient"]) {
        const result = yield* Effect.promise(() => client.callTool({ name, arguments: { goal: "test" } }))
        const body = result.structuredContent as any
        assert.strictEqual(body.connection_id, caller.connectionId)
        assert.strictEqual(body.connection_short, caller.connectionId.slice(0, 8))
        assert.strictEqual(body.profile, "full")
        assert.strictEqual(body.goal, "test")
        assert.strictEqual(typeof body._inbox_unread, "number")
        assert.deepStrictEqual(textJson(result), body, "text block carries the same JSON")
      }
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("--tool-names dotted advertises canonical names; both spellings still work", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* HttpServer
      const { bearer } = yield* connect("dotted", "full")
      const client = yield* mcpClient(mcpUrl, bearer)
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.include(tools.map((t) => t.name), "sophia.orient")
      const r = yield* Effect.promise(() => client.callTool({ name: "sophia_orient", arguments: {} }))
      assert.strictEqual((r.structuredContent as any).name, "dotted")
    }).pipe(Effect.provide(ServeTest("dotted"))))

  it.scoped("bad input never crashes the daemon: each is a clear refusal with a code", () =>
    Effect.gen(function*() {
      const { mcpUrl, port } = yield* HttpServer
      const { bearer } = yield* connect("fuzzer", "full")
      const auth = { authorization: `Bearer ${bearer}`, "content-type": "application/json" }
      // REST: malformed JSON, wrong types, unknown tool, oversized body
      const malformed = yield* request(port, { path: "/api/tools/sophia.orient", headers: auth, body: "{not json" })
      assert.strictEqual(malformed.status, 400)
      assert.strictEqual(JSON.parse(malformed.body).error.code, "validation_error")
      const wrongType = yield* request(port, { path: "/api/tools/sophia.orient", headers: auth, body: "{\"goal\": 42}" })
      assert.strictEqual(wrongType.status, 400)
      assert.strictEqual(JSON.parse(wrongType.body).error.code, "validation_error")
      assert.strictEqual(typeof JSON.parse(wrongType.body)._inbox_unread, "number")
      const unknown = yield* request(port, { path: "/api/tools/sophia.orbit", headers: auth, body: "{}" })
      assert.strictEqual(unknown.status, 404)
      assert.strictEqual(JSON.parse(unknown.body).error.code, "not_found")
      const big = Buffer.alloc(2 * 1024 * 1024, "a")
      const oversized = yield* request(port, {
        path: "/api/tools/sophia.orient",
        headers: auth,
        body: Buffer.concat([Buffer.from("{\"goal\":\""), big, Buffer.from("\"}")])
      })
      assert.strictEqual(oversized.status, 413)
      assert.strictEqual(JSON.parse(oversized.body).error.code, "payload_too_large")
      // and it says how to go on: split the call
      assert.include(JSON.parse(oversized.body).error.hint, "split the call")
      // MCP: malformed JSON and oversized bodies
      const mcpMalformed = yield* request(port, { path: "/mcp", headers: { ...mcpHeaders, ...auth }, body: "{oops" })
      assert.strictEqual(mcpMalformed.status, 400)
      assert.strictEqual(JSON.parse(mcpMalformed.body).error.code, -32700)
      const mcpBig = yield* request(port, {
        path: "/mcp",
        headers: { ...mcpHeaders, ...auth },
        body: Buffer.concat([Buffer.from("{\"x\":\""), big, Buffer.from("\"}")])
      })
      assert.strictEqual(mcpBig.status, 413)
      assert.strictEqual(JSON.parse(mcpBig.body).error.data.code, "payload_too_large")
      assert.include(JSON.parse(mcpBig.body).error.data.hint, "sophia.begin_import_session")
      // MCP: wrong argument types and unknown tools are isError results, not JSON-RPC errors
      const client = yield* mcpClient(mcpUrl, bearer)
      const bad = yield* Effect.promise(() => client.callTool({ name: "sophia_orient", arguments: { goal: 42 } }))
      assert.isTrue(bad.isError)
      assert.strictEqual(textJson(bad).error.code, "validation_error")
      const missing = yield* Effect.promise(() => client.callTool({ name: "sophia_nope", arguments: {} }))
      assert.isTrue(missing.isError)
      assert.strictEqual(textJson(missing).error.code, "not_found")
      // and the daemon still answers
      const health = yield* request(port, { method: "GET", path: "/healthz" })
      assert.strictEqual(health.status, 200)
      const after = yield* Effect.promise(() => client.callTool({ name: "sophia_orient", arguments: {} }))
      assert.isUndefined(after.isError)
    }).pipe(Effect.provide(ServeTest("underscore", 1024 * 1024))))

  it.scoped("MCP sessions are bounded per connection: the least recently used one is closed", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* HttpServer
      const { bearer } = yield* connect("chatty", "full")
      const first = yield* mcpClient(mcpUrl, bearer)
      yield* Effect.promise(() => first.callTool({ name: "sophia_orient", arguments: {} }))
      for (let i = 0; i < 16; i++) yield* mcpClient(mcpUrl, bearer)
      const error = yield* Effect.promise(() =>
        first.callTool({ name: "sophia_orient", arguments: {} }).then(() => undefined, (e: Error) => e)
      )
      assert.isDefined(error, "the oldest session was closed")
      const fresh = yield* mcpClient(mcpUrl, bearer)
      const ok = yield* Effect.promise(() => fresh.callTool({ name: "sophia_orient", arguments: {} }))
      assert.isUndefined(ok.isError)
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("every response tells the client how long an idle connection stays open (Keep-Alive: timeout=65)", () =>
    Effect.gen(function*() {
      const { port } = yield* HttpServer
      const { bearer } = yield* connect("agent", "full")
      const authorized = { ...mcpHeaders, authorization: `Bearer ${bearer}` }
      // the MCP responses are the SDK's (an SSE stream with its own `Connection: keep-alive`)
      const opened = yield* request(port, { path: "/mcp", headers: authorized, body: initialize })
      assert.strictEqual(opened.status, 200)
      assert.strictEqual(opened.headers["content-type"], "text/event-stream")
      assert.strictEqual(opened.headers["keep-alive"], "timeout=65")
      const session = opened.headers["mcp-session-id"] as string
      const call = yield* request(port, {
        path: "/mcp",
        headers: { ...authorized, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "sophia_orient", arguments: {} } })
      })
      assert.strictEqual(call.status, 200)
      assert.strictEqual(textJson(JSON.parse(call.body.split("data: ")[1]).result).name, "agent")
      assert.strictEqual(call.headers["keep-alive"], "timeout=65")
      // the daemon's own replies (a refusal, REST) say the same
      const refused = yield* request(port, { path: "/mcp", headers: mcpHeaders, body: initialize })
      assert.strictEqual(refused.status, 401)
      assert.strictEqual(refused.headers["keep-alive"], "timeout=65")
      const rest = yield* request(port, {
        path: "/api/tools/sophia.orient",
        headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
        body: "{}"
      })
      assert.strictEqual(rest.status, 200)
      assert.strictEqual(rest.headers["keep-alive"], "timeout=65")
    }).pipe(Effect.provide(ServeTest())))

  it.scoped("hygiene: /.well-known/oauth-* is a plain 404; foreign Host and Origin are refused", () =>
    Effect.gen(function*() {
      const { port } = yield* HttpServer
      const { bearer } = yield* connect("hygiene", "full")
      for (const path of ["/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"]) {
        const r = yield* request(port, { method: "GET", path })
        assert.strictEqual(r.status, 404, path)
        assert.strictEqual(r.body, "Not Found")
      }
      const auth = { authorization: `Bearer ${bearer}` }
      const evilHost = yield* request(port, {
        path: "/mcp",
        headers: { ...mcpHeaders, ...auth, host: `evil.example:${port}` },
        body: initialize
      })
      assert.strictEqual(evilHost.status, 403)
      const evilOrigin = yield* request(port, {
        path: "/mcp",
        headers: { ...mcpHeaders, ...auth, origin: "http://evil.example" },
        body: initialize
      })
      assert.strictEqual(evilOrigin.status, 403)
      const localOrigin = yield* request(port, {
        path: "/mcp",
        headers: { ...mcpHeaders, ...auth, origin: `http://localhost:${port}` },
        body: initialize
      })
      assert.strictEqual(localOrigin.status, 200)
      // a page served from another local port is another origin
      const otherPort = yield* request(port, {
        path: "/mcp",
        headers: { ...mcpHeaders, ...auth, origin: `http://localhost:${port === 3000 ? 3001 : 3000}` },
        body: initialize
      })
      assert.strictEqual(otherPort.status, 403)
      const badPath = yield* request(port, {
        path: "/api/tools/%E0%A4",
        headers: { ...auth, "content-type": "application/json" },
        body: "{}"
      })
      assert.strictEqual(badPath.status, 400)
      assert.strictEqual(JSON.parse(badPath.body).error.code, "validation_error")
    }).pipe(Effect.provide(ServeTest())))
})
