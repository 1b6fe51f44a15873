import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import type { Caller } from "../../src/domain/Auth.js"
import { SophiaTest } from "../../src/layers/App.js"
import { Dispatcher } from "../../src/mcp/Dispatch.js"
import { makeMcpServer } from "../../src/mcp/McpServer.js"
import { Coordination } from "../../src/services/Coordination.js"
import { Wakeups } from "../../src/services/Wakeups.js"
import { connect } from "../support/Fixtures.js"

/** The real SDK `Server` (makeMcpServer) and a real SDK `Client` over a linked in-memory pair. */
const runtime = ManagedRuntime.make(SophiaTest)
afterAll(() => runtime.dispose())

const newCaller = (name: string, user?: string) =>
  runtime.runPromise(Effect.map(connect(name, "full", user), (c) => c.caller as Caller))

const session = async (caller: Caller) => {
  const dispatcher = await runtime.runPromise(Dispatcher)
  const server = makeMcpServer({
    dispatcher,
    naming: "underscore",
    resolveCaller: async () => caller,
    runPromise: (effect, options) => runtime.runPromise(effect, options)
  })
  const client = new Client({ name: "inbox-test", version: "1.0.0" })
  const updates: Array<string> = []
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, async (n) => {
    updates.push(n.params.uri)
  })
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await server.connect(serverSide)
  await client.connect(clientSide)
  return { client, updates }
}

const say = (caller: Caller, channel: string, body: string, kind: "status" | "heartbeat" = "status") =>
  runtime.runPromise(Effect.flatMap(Coordination, (c) => c.post(caller, { channel, kind, body })))
const beacon = (caller: Caller) => runtime.runPromise(Effect.flatMap(Coordination, (c) => c.beacon(caller, {})))
const parked = () => runtime.runPromise(Effect.map(Wakeups, (w) => w.parkedCount()))
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const until = async (what: () => Promise<boolean>, ms = 10_000) => {
  const end = Date.now() + ms
  while (!(await what())) {
    if (Date.now() > end) throw new Error("timed out")
    await sleep(10)
  }
}

describe("the inbox as MCP resources", () => {
  it("lists sophia://inbox and the channel template; reading returns the inbox page, compact, marking nothing", async () => {
    const a = await newCaller("res-a")
    const b = await newCaller("res-b")
    await say(a, "res-c", "hello resources")
    const { client } = await session(b)
    assert.isTrue(client.getServerCapabilities()?.resources?.subscribe === true)
    const listed = await client.listResources()
    assert.deepStrictEqual(listed.resources.map((r) => r.uri), ["sophia://inbox"])
    const templates = await client.listResourceTemplates()
    assert.deepStrictEqual(templates.resourceTemplates.map((t) => t.uriTemplate), ["sophia://inbox/{channel}"])
    const read = await client.readResource({ uri: "sophia://inbox" })
    const page = JSON.parse((read.contents[0] as { text: string }).text)
    assert.deepStrictEqual(page.posts.map((p: any) => p.body), ["hello resources"])
    assert.deepStrictEqual(Object.keys(page.posts[0]).sort(), ["agent_name", "body", "channel", "channel_seq", "kind"])
    assert.strictEqual(page._inbox_unread, 1, "a resource read marks nothing read")
    const channel = await client.readResource({ uri: "sophia://inbox/res-c" })
    assert.strictEqual(JSON.parse((channel.contents[0] as { text: string }).text).posts.length, 1)
    await client.close()
  })

  it("a subscribed session is notified after a post it would see as unread, not after a heartbeat or its own post", async () => {
    const a = await newCaller("sub-a")
    const b = await newCaller("sub-b")
    const { client, updates } = await session(b)
    await client.subscribeResource({ uri: "sophia://inbox" })
    await client.subscribeResource({ uri: "sophia://inbox/sub-chan" })
    await beacon(a)
    await say(a, "sub-chan", "tick", "heartbeat")
    await say(b, "sub-chan", "my own post")
    await sleep(300)
    assert.deepStrictEqual(updates, [], "no notification for heartbeats or own posts")
    await say(a, "sub-chan", "for b")
    await until(async () => updates.length >= 2)
    assert.deepStrictEqual([...updates].sort(), ["sophia://inbox", "sophia://inbox/sub-chan"])
    await say(a, "other-chan", "elsewhere")
    await until(async () => updates.length >= 3)
    await sleep(100)
    assert.deepStrictEqual(updates.slice(2), ["sophia://inbox"], "the channel subscription hears its channel only")
    // unsubscribed: silence
    await client.unsubscribeResource({ uri: "sophia://inbox" })
    await client.unsubscribeResource({ uri: "sophia://inbox/sub-chan" })
    await say(a, "sub-chan", "after unsubscribe")
    await sleep(300)
    assert.lengthOf(updates, 3)
    await client.close()
  })
})

describe("long polls over MCP end with their client", () => {
  it("a cancelled tools/call and a closed session leave nothing parked", async () => {
    // a user of its own: nothing in its inbox, so the poll parks
    const b = await newCaller("poll-b", "poll-user")
    const before = await parked()
    const { client } = await session(b)
    const controller = new AbortController()
    const cancelled = client.callTool({ name: "sophia_coordination_inbox", arguments: { wait_s: 60 } }, undefined, {
      signal: controller.signal,
      timeout: 120_000
    })
    await until(async () => (await parked()) === before + 1)
    controller.abort()
    await cancelled.catch(() => undefined)
    await until(async () => (await parked()) === before)
    // a session closed while its long poll waits
    const second = await session(b)
    const pending = second.client.callTool({ name: "sophia_coordination_inbox", arguments: { wait_s: 60 } }, undefined, {
      timeout: 120_000
    }).catch(() => undefined)
    await until(async () => (await parked()) === before + 1)
    await second.client.close()
    await pending
    await until(async () => (await parked()) === before)
    await client.close()
  })
})
