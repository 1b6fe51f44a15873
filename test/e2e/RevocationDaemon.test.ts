/**
 * Revocation against the real daemon (issue 28): a real `sophia serve` over a SQLite file, the connection
 * revoked by a real `sophia connection revoke` process — which tells the daemon nothing; it finds out by
 * looking (`ForeignWrites`, within a second or so). Its parked REST long poll answers 401 (as the door answers
 * a revoked bearer), its MCP long poll answers `unauthenticated`, its MCP session closes and its resource
 * subscription hears nothing after `revoked_at`; a `sophia stdio` server of that connection answers its long
 * poll `unauthenticated` and ends. Revoked in the daemon's own process (the portal's Revoke), the session closes
 * at once. Generous time bounds; order and outcomes asserted.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { it as effectIt } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { HttpServer } from "../../src/mcp/Http.js"
import { Auth } from "../../src/services/Auth.js"
import { Wakeups } from "../../src/services/Wakeups.js"
import { SOPHIA, sophia, tempDb } from "../support/Cli.js"
import type { Daemon } from "../support/Daemon.js"
import { startDaemon } from "../support/Daemon.js"
import { connect } from "../support/Fixtures.js"
import { mcpClient, ServeTest } from "../support/Serve.js"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const mint = (db: string, name: string) => {
  const r = sophia(["connection", "create", "--name", name, "--profile", "full", "--db", db])
  assert.strictEqual(r.status, 0, r.stderr)
  return JSON.parse(r.stdout).bearer as string
}
const revoke = (db: string, name: string) => {
  const r = sophia(["connection", "revoke", name, "--db", db])
  assert.strictEqual(r.status, 0, r.stderr)
  return { at: Date.now(), revokedAt: JSON.parse(r.stdout).revoked_at as string }
}
/** A promise's outcome within `ms`, or a rejection saying it did not come. */
const within = <A>(p: Promise<A>, ms: number, what: string) =>
  Promise.race([p, sleep(ms).then(() => Promise.reject(new Error(`${what} did not end within ${ms} ms`)))])
const textOf = (result: unknown) => JSON.parse((result as { content: Array<{ text: string }> }).content[0].text)

describe("revoked by the CLI while the daemon holds its work (SQLite, another process)", () => {
  const db = tempDb()
  let daemon: Daemon
  beforeAll(async () => {
    daemon = await startDaemon(db)
  }, 120_000)
  afterAll(async () => {
    await daemon?.kill()
  })

  /** The daemon's open MCP sessions (its /metrics gauge). */
  const sessions = () =>
    fetch(`${daemon.baseUrl}/metrics`).then((r) => r.text()).then((text) => Number(/^sophia_mcp_sessions (\d+)/m.exec(text)?.[1]))
  const post = (bearer: string, channel: string, body: string) =>
    fetch(`${daemon.baseUrl}/api/tools/sophia.coordination_post`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body: JSON.stringify({ channel, kind: "status", body })
    }).then((r) => r.json())

  it("REST and MCP long polls answer unauthenticated, the MCP session closes, its subscription hears nothing after revoked_at", async () => {
    const writer = mint(db, "writer")
    const bearer = mint(db, "revoked-agent")

    // a REST long poll on a quiet channel
    const rest = fetch(`${daemon.baseUrl}/api/tools/sophia.coordination_inbox`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body: JSON.stringify({ channel: "quiet", cursor: "p0", wait_s: 60 })
    })

    // an MCP session with a subscription to the inbox and a long poll of its own
    const client = new Client({ name: "revocation-test", version: "1.0.0" })
    const transport = new StreamableHTTPClientTransport(new URL(`${daemon.baseUrl}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${bearer}` } }
    })
    const updates: Array<number> = []
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, async () => void updates.push(Date.now()))
    await client.connect(transport)
    assert.strictEqual(await sessions(), 1)
    await client.subscribeResource({ uri: "sophia://inbox" })
    const mcpPoll = client.callTool({ name: "sophia_coordination_inbox", arguments: { channel: "quiet", cursor: "p0", wait_s: 60 } }, undefined, {
      timeout: 120_000
    })

    // the subscription works before the revocation
    await post(writer, "noise", "before")
    for (let i = 0; i < 200 && updates.length === 0; i++) await sleep(25)
    assert.strictEqual(updates.length, 1, "notified of the post before the revocation")
    await sleep(500)

    const { at, revokedAt } = revoke(db, "revoked-agent")

    const restReply = await within(rest, 20_000, "the REST long poll")
    assert.strictEqual(restReply.status, 401)
    assert.match(restReply.headers.get("www-authenticate") ?? "", /Bearer/)
    const restBody = (await restReply.json()) as any
    assert.strictEqual(restBody.error.code, "unauthenticated")
    assert.strictEqual(restBody.error.reason, "unknown_or_revoked")

    const mcpReply = await within(mcpPoll, 20_000, "the MCP long poll")
    assert.isTrue(mcpReply.isError === true, JSON.stringify(mcpReply))
    assert.strictEqual(textOf(mcpReply).error.code, "unauthenticated")
    assert.isBelow(Date.now() - at, 20_000)

    // the daemon closed the session (its subscription with it), and nothing more is delivered to it
    for (let i = 0; i < 400 && (await sessions()) > 0; i++) await sleep(25)
    assert.strictEqual(await sessions(), 0, "the revoked connection's session is closed")
    assert.isBelow(Date.now() - at, 20_000)
    const heard = updates.length
    await post(writer, "noise", "after")
    await sleep(1_500)
    assert.strictEqual(updates.length, heard, "no notification after the revocation")
    for (const t of updates) assert.isTrue(new Date(t).toISOString() < revokedAt, "every notification came before revoked_at")
    await client.close().catch(() => undefined)
  }, 90_000)

  it("a stdio server of the revoked connection answers its long poll unauthenticated and ends", async () => {
    const bearer = mint(db, "stdio-agent")
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [SOPHIA, "stdio", "--db", db],
      env: { ...(process.env as Record<string, string>), SOPHIA_BEARER: bearer, SOPHIA_DATABASE_URL: "" },
      stderr: "pipe"
    })
    let stderr = ""
    transport.stderr?.on("data", (d) => (stderr += d))
    const client = new Client({ name: "stdio-revocation-test", version: "1.0.0" })
    let closed = false
    client.onclose = () => void (closed = true)
    await client.connect(transport)
    try {
      const poll = client.callTool({ name: "sophia_coordination_inbox", arguments: { wait_s: 60 } }, undefined, { timeout: 120_000 })
      await sleep(1_000)
      revoke(db, "stdio-agent")
      const reply = await within(poll, 20_000, "the stdio long poll")
      assert.strictEqual(textOf(reply).error.code, "unauthenticated", JSON.stringify(reply))
      for (let i = 0; i < 400 && !closed; i++) await sleep(25)
      assert.isTrue(closed, `the stdio server ended; stderr: ${stderr}`)
      assert.include(stderr, "revoked")
    } finally {
      await client.close().catch(() => undefined)
    }
  }, 90_000)
})

describe("revoked in the daemon's own process (the portal's Revoke)", () => {
  effectIt.live("the connection's MCP session closes at once, its long poll answered unauthenticated first", () =>
    Effect.scoped(Effect.gen(function*() {
      const { baseUrl, mcpUrl } = yield* HttpServer
      const auth = yield* Auth
      const { bearer } = yield* connect("portal-revoked", "full")
      const sessions = Effect.promise(() =>
        fetch(`${baseUrl}/metrics`).then((r) => r.text()).then((text) => Number(/^sophia_mcp_sessions (\d+)/m.exec(text)?.[1])))
      const client = yield* mcpClient(mcpUrl, bearer)
      yield* Effect.promise(() => client.subscribeResource({ uri: "sophia://inbox" }))
      assert.strictEqual(yield* sessions, 1)
      const poll = client.callTool({ name: "sophia_coordination_inbox", arguments: { wait_s: 60 } }, undefined, { timeout: 120_000 })
      const wakeups = yield* Wakeups
      for (let i = 0; i < 400 && wakeups.stats().waiting < 1; i++) yield* Effect.sleep("5 millis")
      yield* auth.revoke("portal-revoked")
      const reply = yield* Effect.promise(() => poll)
      assert.strictEqual(textOf(reply).error.code, "unauthenticated")
      for (let i = 0; i < 400 && (yield* sessions) > 0; i++) yield* Effect.sleep("10 millis")
      assert.strictEqual(yield* sessions, 0)
    })).pipe(Effect.provide(ServeTest())))
})
