import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Layer } from "effect"
import { SophiaTest } from "../../src/layers/App.js"
import * as Http from "../../src/mcp/Http.js"
import type { ToolNaming } from "../../src/mcp/Registry.js"

/** The real HTTP transport on a free loopback port over an in-memory store. */
export const ServeTest = (naming: ToolNaming = "underscore", maxBodyBytes?: number) =>
  Http.layer({ host: "127.0.0.1", port: 0, naming, maxBodyBytes }).pipe(Layer.provideMerge(SophiaTest))

/** A real MCP SDK client over Streamable HTTP with a bearer; closed with the scope. */
export const mcpClient = (url: string, bearer: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "sophia-test", version: "1.0.0" })
      const transport = new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${bearer}` } }
      })
      await client.connect(transport)
      return client
    }),
    (client) => Effect.promise(() => client.close().catch(() => undefined))
  )

/** Parse the single text block of a tool result. */
export const textJson = (result: unknown): any => JSON.parse((result as { content: Array<{ text: string }> }).content[0].text)
