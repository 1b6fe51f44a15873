/**
 * The transport's own limit: a bare MCP server on the same SDK and the same Streamable HTTP transport
 * (one session per client, like Sophia's), whose only tool does nothing. Prints its MCP URL on stdout.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, isInitializeRequest, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { randomUUID } from "node:crypto"
import * as http from "node:http"

/** @type {Map<string, StreamableHTTPServerTransport>} */
const sessions = new Map()

const makeServer = () => {
  const server = new Server({ name: "bare", version: "0.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: "noop", description: "does nothing", inputSchema: { type: "object" } }]
  }))
  server.setRequestHandler(CallToolRequestSchema, async () => {
    const body = { ok: true }
    return { content: [{ type: "text", text: JSON.stringify(body) }], structuredContent: body }
  })
  return server
}

/** @param {http.IncomingMessage} req */
const readBody = (req) =>
  new Promise((resolve, reject) => {
    const chunks = []
    req.on("data", (c) => chunks.push(c))
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      try {
        resolve(text.length === 0 ? undefined : JSON.parse(text))
      } catch (e) {
        reject(e)
      }
    })
    req.on("error", reject)
  })

const httpServer = http.createServer(async (req, res) => {
  try {
    const body = req.method === "POST" ? await readBody(req) : undefined
    const id = req.headers["mcp-session-id"]
    let transport = typeof id === "string" ? sessions.get(id) : undefined
    if (!transport && req.method === "POST" && isInitializeRequest(body)) {
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => void sessions.set(sid, created)
      })
      created.onclose = () => {
        if (created.sessionId) sessions.delete(created.sessionId)
      }
      await makeServer().connect(created)
      transport = created
    }
    if (!transport) {
      res.writeHead(400).end()
      return
    }
    await transport.handleRequest(req, res, body)
  } catch {
    if (!res.headersSent) res.writeHead(500).end()
  }
})
httpServer.keepAliveTimeout = 60_000
httpServer.listen(0, "127.0.0.1", () => {
  const { port } = /** @type {import("node:net").AddressInfo} */ (httpServer.address())
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}/mcp` }) + "\n")
})
