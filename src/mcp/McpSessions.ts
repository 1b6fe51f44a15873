import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import type { Effect } from "effect"
import { randomUUID } from "node:crypto"
import type * as http from "node:http"
import type { Caller } from "../domain/Auth.js"
import type { Dispatcher } from "./Dispatch.js"
import {
  abandonedBy,
  authFailureOf,
  bearerOf,
  bodyRefusal,
  hintKeepAlive,
  jsonRpcError,
  readJson,
  sendHeadersWithFirstEvent,
  sendJson,
  WWW_AUTHENTICATE
} from "./HttpBasics.js"
import { makeMcpServer } from "./McpServer.js"
import { AUTH_MESSAGE } from "./Refusals.js"
import type { ToolNaming } from "./Registry.js"

interface Session {
  readonly transport: StreamableHTTPServerTransport
  readonly connectionId: string
  lastSeen: number
}

/** Nothing that matters lives in a session, so an idle one is simply closed (the client re-initializes). */
const SESSION_IDLE_MS = 30 * 60_000
/** Per connection; opening one more closes its least recently used session. */
const SESSIONS_PER_CONNECTION = 16

/**
 * Streamable HTTP MCP at `/mcp`: one SDK transport and server per session, each session bound to the
 * connection that opened it. Every request is authenticated first (revocation bites on the next request,
 * even inside an open session).
 */
export const makeMcpSessions = (options: {
  readonly dispatcher: Dispatcher
  readonly naming: ToolNaming
  readonly runPromise: <A>(effect: Effect.Effect<A>, options?: { readonly signal?: AbortSignal }) => Promise<A>
  readonly authenticate: (req: http.IncomingMessage) => Promise<Caller | undefined>
  readonly limit: number
}) => {
  const sessions = new Map<string, Session>()

  /** A new session for an initialize request (the connection's least recently used one goes past the cap). */
  const open = async (req: http.IncomingMessage, res: http.ServerResponse, body: unknown, caller: Caller) => {
    const own = [...sessions.values()].filter((s) => s.connectionId === caller.connectionId)
    if (own.length >= SESSIONS_PER_CONNECTION) {
      const oldest = own.reduce((a, b) => (a.lastSeen <= b.lastSeen ? a : b))
      await oldest.transport.close().catch(() => undefined)
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, { transport, connectionId: caller.connectionId, lastSeen: Date.now() })
      }
    })
    const server = makeMcpServer({
      dispatcher: options.dispatcher,
      naming: options.naming,
      runPromise: options.runPromise,
      resolveCaller: async (extra) => (extra.authInfo?.extra?.caller as Caller | undefined)
    })
    // (the Server hears the close through the transport too, and drops its own subscriptions)
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId)
    }
    await server.connect(transport)
    await transport.handleRequest(req, res, body)
    // an initialize that did not open a session leaves nothing behind
    if (!transport.sessionId || !sessions.has(transport.sessionId)) await server.close().catch(() => undefined)
  }

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const caller = await options.authenticate(req)
    // the JSON-RPC message stays the one MCP clients know; `data` says which failure it was and what to do
    if (!caller) return sendJson(res, 401, jsonRpcError(-32001, AUTH_MESSAGE, authFailureOf(req)), WWW_AUTHENTICATE)
    let body: unknown
    if (req.method === "POST") {
      try {
        body = await readJson(req, options.limit)
      } catch (e) {
        const r = bodyRefusal(e, options.limit)
        return sendJson(res, r.status, jsonRpcError(r.status === 413 ? -32600 : -32700, r.message, { code: r.code, ...r.details }))
      }
      sendHeadersWithFirstEvent(res)
    }
    hintKeepAlive(res)
    const auth: AuthInfo = {
      token: bearerOf(req)!,
      clientId: caller.connectionId,
      scopes: [],
      extra: { caller, abandoned: abandonedBy(res) }
    }
    Object.assign(req, { auth })
    const sessionId = req.headers["mcp-session-id"]
    if (typeof sessionId === "string") {
      const session = sessions.get(sessionId)
      // a session belongs to the connection that opened it; another bearer cannot ride it
      if (!session || session.connectionId !== caller.connectionId) {
        return sendJson(res, 404, jsonRpcError(-32001, "Session not found"))
      }
      session.lastSeen = Date.now()
      return session.transport.handleRequest(req, res, body)
    }
    if (req.method === "POST" && isInitializeRequest(body)) return open(req, res, body, caller)
    return sendJson(res, 400, jsonRpcError(-32000, "Bad Request: no valid MCP session id; send initialize first"))
  }

  /** Close the sessions nobody used for a while (clients that vanished without a DELETE). */
  const closeIdle = () => {
    const cutoff = Date.now() - SESSION_IDLE_MS
    const idle = [...sessions.values()].filter((s) => s.lastSeen < cutoff)
    return Promise.allSettled(idle.map((s) => s.transport.close()))
  }
  const closeAll = () => Promise.allSettled([...sessions.values()].map((s) => s.transport.close()))

  return { handle, closeIdle, closeAll, size: () => sessions.size } as const
}
