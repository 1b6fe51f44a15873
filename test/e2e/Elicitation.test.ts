import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import type { ElicitRequest, ElicitResult } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, ManagedRuntime } from "effect"
import type { Caller, Profile } from "../../src/domain/Auth.js"
import { makeCore } from "../../src/layers/App.js"
import { SqliteLive } from "../../src/layers/Sql.js"
import { Dispatcher } from "../../src/mcp/Dispatch.js"
import { HttpServer } from "../../src/mcp/Http.js"
import { makeMcpServer } from "../../src/mcp/McpServer.js"
import { Approvals } from "../../src/services/Approvals.js"
import { Auth } from "../../src/services/Auth.js"
import { tempDb } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { appOnFile } from "../support/Fixtures.js"
import { ServeTest } from "../support/Serve.js"

/**
 * The approval flow through MCP elicitation, end to end: the real SDK `Server` built by makeMcpServer and a
 * real SDK `Client` that declares `capabilities.elicitation` and answers it, over a linked in-memory pair and
 * over the real Streamable HTTP layer. The requesting agent's client decides a plain write only on a
 * connection the owner minted with the allowance (`allowElicitation`); elsewhere, and for elevated tools
 * always, its `accept` is never asked for and the owner decides.
 */
const app = makeCore(SqliteLive(":memory:")).pipe(
  Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_APPROVAL_WAIT_MS", "50"]]))))
)
const runtime = ManagedRuntime.make(app)
afterAll(() => runtime.dispose())

const textJson = (result: unknown): any => JSON.parse((result as { content: Array<{ text: string }> }).content[0].text)

/** A new connection, minted by the owner with or without the elicitation allowance. */
const mint = (name: string, profile: Profile, allowElicitation: boolean) =>
  Effect.gen(function*() {
    const auth = yield* Auth
    const minted = yield* auth.createConnection({ name, profile, allowElicitation })
    return { caller: yield* Effect.orDie(auth.authenticate(minted.bearer)), bearer: minted.bearer }
  })

/**
 * An MCP session for a new connection (`allowed`: minted with the elicitation allowance); `answer` (when given)
 * makes the client declare elicitation and reply with it.
 */
const session = async (name: string, profile: Profile, allowed: boolean, answer?: (request: ElicitRequest) => ElicitResult) => {
  const dispatcher = await runtime.runPromise(Dispatcher)
  const { caller } = await runtime.runPromise(mint(name, profile, allowed)) as { caller: Caller }
  const server = makeMcpServer({
    dispatcher,
    naming: "underscore",
    resolveCaller: async () => caller,
    runPromise: (effect) => runtime.runPromise(effect)
  })
  const asked: Array<ElicitRequest> = []
  const client = new Client(
    { name: "elicitation-test", version: "1.0.0" },
    { capabilities: answer ? { elicitation: {} } : {} }
  )
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request)
      return answer(request)
    })
  }
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await server.connect(serverSide)
  await client.connect(clientSide)
  return { client, asked, close: () => client.close() }
}

const allApprovals = () =>
  runtime.runPromise(Effect.flatMap(Approvals, (a) => a.list({ all: true })))

const accept = (): ElicitResult => ({ action: "accept", content: { approve: true } })

describe("Elicitation (real SDK client)", () => {
  it("on a connection minted with the allowance, an assistant's write is approved by its client's answer, once, and runs", async () => {
    const s = await session("helper", "assistant", true, accept)
    try {
      const result = await s.client.callTool({ name: "sophia_add_document", arguments: { title: "Spec", body: "v2 spec" } })
      assert.notStrictEqual(result.isError, true, JSON.stringify(result))
      const body = (result.structuredContent ?? textJson(result)) as any
      assert.match(body.document_id, /^doc-/)
      assert.lengthOf(s.asked, 1)
      assert.include(s.asked[0].params.message, "sophia.add_document")
      const approvals = await allApprovals()
      const mine = approvals.filter((a) => a.tool === "sophia.add_document" && a.status === "executed")
      assert.lengthOf(mine, 1)
      assert.strictEqual(mine[0].decided_via, "elicitation")
      const search = await s.client.callTool({ name: "sophia_search_documents", arguments: { query: "spec" } })
      assert.strictEqual((search.structuredContent as any).items[0].document_id, body.document_id)
    } finally {
      await s.close()
    }
  })

  it("a declined elicitation refuses the write with approval_denied", async () => {
    const s = await session("helper-2", "assistant", true, () => ({ action: "decline" }))
    try {
      const result = await s.client.callTool({ name: "sophia_add_document", arguments: { title: "No", body: "declined" } })
      assert.strictEqual(result.isError, true)
      assert.strictEqual(textJson(result).error.code, "approval_denied")
      assert.lengthOf(s.asked, 1)
    } finally {
      await s.close()
    }
  })

  it("without the allowance (the default) the client's accept is never asked: approval_required, pending for the owner", async () => {
    const s = await session("eager", "assistant", false, accept)
    try {
      const result = await s.client.callTool({ name: "sophia_add_document", arguments: { title: "Mine", body: "self-approved?" } })
      assert.strictEqual(result.isError, true, JSON.stringify(result))
      const error = textJson(result).error
      assert.strictEqual(error.code, "approval_required")
      assert.match(error.approval_id, /^apr-/)
      assert.include(error.hint, "sophia.approval_status")
      assert.lengthOf(s.asked, 0)
      const row = (await allApprovals()).find((a) => a.approval_id === error.approval_id)!
      assert.strictEqual(row.status, "pending")
      assert.strictEqual(row.decided_via, null)
      // the same call again: still the owner's to decide, never the client's
      const again = await s.client.callTool({ name: "sophia_add_document", arguments: { title: "Mine", body: "self-approved?" } })
      assert.strictEqual(textJson(again).error.approval_id, error.approval_id)
      assert.lengthOf(s.asked, 0)
      assert.deepStrictEqual((await allApprovals()).filter((a) => a.connection_name === "eager").map((a) => a.status), ["pending"])
    } finally {
      await s.close()
    }
  })

  it("elevated calls never go through elicitation, even with the allowance; a client without it gets approval_required with an id", async () => {
    const s = await session("worker", "full", true, accept)
    const plain = await session("helper-3", "assistant", true)
    try {
      const elevated = await s.client.callTool({ name: "sophia_create_entity", arguments: { name: "alpha", kind: "project" } })
      assert.strictEqual(elevated.isError, true)
      assert.strictEqual(textJson(elevated).error.code, "owner_approval_required")
      assert.lengthOf(s.asked, 0)
      const write = await plain.client.callTool({ name: "sophia_add_document", arguments: { title: "t", body: "b" } })
      assert.strictEqual(write.isError, true)
      const error = textJson(write).error
      assert.strictEqual(error.code, "approval_required")
      assert.match(error.approval_id, /^apr-/)
      // the owner approves through its own channel; the agent repeats the call with the id
      await runtime.runPromise(Effect.flatMap(Approvals, (a) => a.decide(error.approval_id, "approved")))
      const again = await plain.client.callTool({
        name: "sophia_add_document",
        arguments: { title: "t", body: "b", approval_id: error.approval_id }
      })
      assert.notStrictEqual(again.isError, true, JSON.stringify(again))
      assert.match((again.structuredContent as any).document_id, /^doc-/)
    } finally {
      await s.close()
      await plain.close()
    }
  })
})

describe("Elicitation over the real Streamable HTTP layer", () => {
  /** A real SDK client over HTTP with `bearer`, declaring elicitation and accepting whatever it is asked; closed with the scope. */
  const eagerClient = (mcpUrl: string, bearer: string) => {
    const asked: Array<string> = []
    return Effect.map(
      Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new Client({ name: "elicitation-http", version: "1.0.0" }, { capabilities: { elicitation: {} } })
          client.setRequestHandler(ElicitRequestSchema, async (request) => {
            asked.push(request.params.message)
            return accept()
          })
          await client.connect(
            new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } })
          )
          return client
        }),
        (client) => Effect.promise(() => client.close().catch(() => undefined))
      ),
      (client) => ({ client, asked })
    )
  }
  const call = (client: Client, name: string, args: Record<string, unknown>) => Effect.promise(() => client.callTool({ name, arguments: args }))

  it.scopedLive("with the allowance, the elicitation request travels on the call's own stream and the approved write runs", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* HttpServer
      const { bearer } = yield* mint("http-helper", "assistant", true)
      const { client, asked } = yield* eagerClient(mcpUrl, bearer)
      const result = yield* call(client, "sophia_add_document", { title: "Over HTTP", body: "elicited" })
      assert.notStrictEqual(result.isError, true, JSON.stringify(result))
      assert.match((result.structuredContent as any).document_id, /^doc-/)
      assert.strictEqual(asked.length, 1)
    }).pipe(Effect.provide(ServeTest())))

  it.scopedLive("against the served daemon: an eager client's accept approves nothing without the allowance, and no elevated call ever", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* HttpServer
      const plain = yield* eagerClient(mcpUrl, (yield* mint("http-eager", "assistant", false)).bearer)
      const write = yield* call(plain.client, "sophia_add_document", { title: "Sneaky", body: "not asked" })
      assert.strictEqual(write.isError, true)
      const refused = textJson(write).error
      assert.strictEqual(refused.code, "approval_required")
      assert.strictEqual(plain.asked.length, 0)
      // elevated: refused for the owner even on a connection allowed to elicit, and its client is never asked
      const allowed = yield* eagerClient(mcpUrl, (yield* mint("http-allowed", "full", true)).bearer)
      const elevated = yield* call(allowed.client, "sophia_remember_fact", { subject: "s", predicate: "p", object: "o" })
      assert.strictEqual(textJson(elevated).error.code, "owner_approval_required")
      assert.strictEqual(allowed.asked.length, 0)
      // the allowance is the connection's, as the owner's listings show it
      const listed = new Map((yield* Effect.flatMap(Auth, (a) => a.list())).map((c) => [c.name, c.allow_elicitation]))
      assert.strictEqual(listed.get("http-eager"), false)
      assert.strictEqual(listed.get("http-allowed"), true)
      const approvals = yield* Effect.flatMap(Approvals, (a) => a.list())
      assert.sameMembers(approvals.map((a) => a.approval_id), [refused.approval_id, textJson(elevated).error.approval_id])
      // the owner decides; the agent's repeat runs once
      yield* Effect.flatMap(Approvals, (a) => a.decide(refused.approval_id, "approved"))
      const again = yield* call(plain.client, "sophia_add_document", { title: "Sneaky", body: "not asked", approval_id: refused.approval_id })
      assert.notStrictEqual(again.isError, true, JSON.stringify(again))
      assert.strictEqual(plain.asked.length, 0)
    }).pipe(Effect.provide(ServeTest())))
})

describe("Elicitation against a running `sophia serve` process", () => {
  it("an eager client's accept runs a plain write only on the connection minted with the allowance; elevated never", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    // the owner mints on the daemon's file (what `sophia connection create [--allow-elicitation]` does)
    const owner = ManagedRuntime.make(appOnFile(db, 60_000))
    const clients: Array<Client> = []
    try {
      const minted = await owner.runPromise(Effect.all([mint("eager", "assistant", false), mint("trusted", "assistant", true), mint("lead", "full", true)]))
      const asked: Record<string, number> = {}
      const connectAs = async (name: string, bearer: string) => {
        const client = new Client({ name: `elicitation-${name}`, version: "1.0.0" }, { capabilities: { elicitation: {} } })
        client.setRequestHandler(ElicitRequestSchema, async () => {
          asked[name] = (asked[name] ?? 0) + 1
          return accept()
        })
        await client.connect(
          new StreamableHTTPClientTransport(new URL(`${daemon.baseUrl}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } })
        )
        clients.push(client)
        return client
      }
      const [eager, trusted, lead] = [
        await connectAs("eager", minted[0].bearer),
        await connectAs("trusted", minted[1].bearer),
        await connectAs("lead", minted[2].bearer)
      ]
      const refused = await eager.callTool({ name: "sophia_add_document", arguments: { title: "mine", body: "self-approved?" } })
      assert.strictEqual(textJson(refused).error.code, "approval_required")
      assert.isUndefined(asked.eager)
      const ran = await trusted.callTool({ name: "sophia_add_document", arguments: { title: "theirs", body: "allowed" } })
      assert.notStrictEqual(ran.isError, true, JSON.stringify(ran))
      assert.strictEqual(asked.trusted, 1)
      const elevated = await lead.callTool({ name: "sophia_remember_fact", arguments: { subject: "s", predicate: "p", object: "o" } })
      assert.strictEqual(textJson(elevated).error.code, "owner_approval_required")
      assert.isUndefined(asked.lead)
      const decided = await owner.runPromise(Effect.flatMap(Approvals, (a) => a.list({ all: true })))
      assert.deepStrictEqual(
        decided.map((a) => [a.connection_name, a.status, a.decided_via]).sort(),
        [["eager", "pending", null], ["lead", "pending", null], ["trusted", "executed", "elicitation"]]
      )
    } finally {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)))
      await owner.dispose()
      await daemon.kill("SIGTERM")
    }
  }, 180_000)
})
