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
import { connect } from "../support/Fixtures.js"
import { ServeTest } from "../support/Serve.js"

/**
 * The approval flow through MCP elicitation, end to end: the real SDK `Server` built by makeMcpServer and a
 * real SDK `Client` that declares `capabilities.elicitation` and answers it, over a linked in-memory pair.
 */
const app = makeCore(SqliteLive(":memory:")).pipe(
  Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_APPROVAL_WAIT_MS", "50"]]))))
)
const runtime = ManagedRuntime.make(app)
afterAll(() => runtime.dispose())

const textJson = (result: unknown): any => JSON.parse((result as { content: Array<{ text: string }> }).content[0].text)

/** An MCP session for a new connection; `answer` (when given) makes the client declare elicitation and reply with it. */
const session = async (name: string, profile: Profile, answer?: (request: ElicitRequest) => ElicitResult) => {
  const dispatcher = await runtime.runPromise(Dispatcher)
  const { caller } = await runtime.runPromise(connect(name, profile)) as { caller: Caller }
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

describe("Elicitation (real SDK client)", () => {
  it("an assistant's write is approved by the client's answer to elicitation, once, and runs", async () => {
    const s = await session("helper", "assistant", () => ({ action: "accept", content: { approve: true } }))
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
    const s = await session("helper-2", "assistant", () => ({ action: "decline" }))
    try {
      const result = await s.client.callTool({ name: "sophia_add_document", arguments: { title: "No", body: "declined" } })
      assert.strictEqual(result.isError, true)
      assert.strictEqual(textJson(result).error.code, "approval_denied")
      assert.lengthOf(s.asked, 1)
    } finally {
      await s.close()
    }
  })

  it("elevated calls never go through elicitation; a client without it gets approval_required with an id", async () => {
    const s = await session("worker", "full", () => ({ action: "accept", content: { approve: true } }))
    const plain = await session("helper-3", "assistant")
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
  it.scopedLive("the elicitation request travels on the call's own stream and the approved write runs", () =>
    Effect.gen(function*() {
      const { mcpUrl } = yield* HttpServer
      const { bearer } = yield* connect("http-helper", "assistant")
      let asked = 0
      const client = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new Client({ name: "elicitation-http", version: "1.0.0" }, { capabilities: { elicitation: {} } })
          client.setRequestHandler(ElicitRequestSchema, async () => {
            asked++
            return { action: "accept", content: { approve: true } }
          })
          await client.connect(
            new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } })
          )
          return client
        }),
        (client) => Effect.promise(() => client.close().catch(() => undefined))
      )
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "sophia_add_document", arguments: { title: "Over HTTP", body: "elicited" } })
      )
      assert.notStrictEqual(result.isError, true, JSON.stringify(result))
      assert.match((result.structuredContent as any).document_id, /^doc-/)
      assert.strictEqual(asked, 1)
    }).pipe(Effect.provide(ServeTest())))
})
