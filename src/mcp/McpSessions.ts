import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import type * as http from "node:http"
import type { Caller } from "../domain/Auth.js"
import { Wakeups } from "../services/Wakeups.js"
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
  /** POST responses still being written (a tool call's answer) */
  answering: number
  /** its connection is revoked: it closes once its answers are out */
  revoked: boolean
}

/** Nothing that matters lives in a session, so an idle one is simply closed (the client re-initializes). */
const SESSION_IDLE_MS = 30 * 60_000
/** Per connection; opening one more closes its least recently used session. */
const SESSIONS_PER_CONNECTION = 16
/** How long a revoked connection's session may still finish its answers before it is closed regardless. */
const REVOKED_GRACE_MS = 5_000

/**
 * Streamable HTTP MCP at `/mcp`: one SDK transport and server per session, each session bound to the
 * connection that opened it. Every request is authenticated first (revocation bites on the next request,
 * even inside an open session), and a session closes when its connection's revocation is heard
 * (`Wakeups.revocation`: this daemon's, another daemon's, or the CLI's as `ForeignWrites` finds it) — its
 * resource subscriptions with it — once the answers it is writing are out (its long polls answer
 * `unauthenticated` at once), within a few seconds at most.
 */
export const makeMcpSessions = (options: {
  readonly dispatcher: Dispatcher
  readonly naming: ToolNaming
  readonly runPromise: <A>(effect: Effect.Effect<A>, options?: { readonly signal?: AbortSignal }) => Promise<A>
  readonly authenticate: (req: http.IncomingMessage) => Promise<Caller | undefined>
  readonly limit: number
}) => {
  const sessions = new Map<string, Session>()
  // the app's wake-ups, when it has them (the daemon's runtime carries every service)
  const wakeups = options.runPromise(Effect.serviceOption(Wakeups))

  const closeIfDone = (session: Session) => {
    if (session.revoked && session.answering === 0) session.transport.close().catch(() => undefined)
  }

  /** Until the session closes: when its connection's revocation is heard, close it (its answers first). */
  const closeOnRevocation = (session: Session, caller: Caller) => {
    const closed = new AbortController()
    const previous = session.transport.onclose
    session.transport.onclose = () => {
      closed.abort()
      previous?.()
    }
    wakeups.then((found) =>
      Option.isNone(found) ? undefined : options.runPromise(
        Effect.scoped(Effect.flatMap(found.value.revocation(caller), (revoked) => revoked)),
        { signal: closed.signal }
      ).then(() => {
        session.revoked = true
        closeIfDone(session)
        setTimeout(() => session.transport.close().catch(() => undefined), REVOKED_GRACE_MS).unref()
      })
    ).catch(() => undefined)
  }

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
        const session: Session = { transport, connectionId: caller.connectionId, lastSeen: Date.now(), answering: 0, revoked: false }
        sessions.set(id, session)
        closeOnRevocation(session, caller)
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
      if (req.method === "POST") {
        session.answering++
        res.once("close", () => {
          session.answering--
          closeIfDone(session)
        })
      }
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
