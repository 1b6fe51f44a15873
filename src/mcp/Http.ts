import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import { Context, Effect, Layer, Option, Runtime, Schedule, Schema } from "effect"
import { randomUUID } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { Caller } from "../domain/Auth.js"
import { MetricsScrape, recordHttpRequest } from "../observability/Metrics.js"
import { Dispatcher } from "./Dispatch.js"
import { makeMcpServer } from "./McpServer.js"
import { PortalRoutes } from "./portal/Routes.js"
import { AUTH_MESSAGE, httpStatusOf } from "./Refusals.js"
import type { ToolNaming } from "./Registry.js"

export interface HttpConfig {
  readonly host: string
  /** 0 picks a free port (tests) */
  readonly port: number
  readonly naming: ToolNaming
  /** request bodies above this are refused with `payload_too_large` before parsing */
  readonly maxBodyBytes?: number
}

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

export class HttpServer extends Context.Tag("sophia/HttpServer")<HttpServer, {
  readonly port: number
  readonly host: string
  /** the MCP endpoint, e.g. http://127.0.0.1:7337/mcp */
  readonly mcpUrl: string
  readonly baseUrl: string
}>() {}

/** The daemon could not listen (port in use, no permission, no such address): one line, not a defect. */
export class ListenError extends Schema.TaggedError<ListenError>()("ListenError", {
  host: Schema.String,
  port: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return `cannot listen on ${this.host}:${this.port}: ${this.reason}`
  }
}

const listenReason = (e: NodeJS.ErrnoException) =>
  e.code === "EADDRINUSE"
    ? "the port is in use (another sophia serve?); pick another with --port"
    : e.code === "EACCES"
    ? "permission denied (ports below 1024 need privileges); pick another with --port"
    : e.code === "EADDRNOTAVAIL" || e.code === "ENOTFOUND"
    ? "no such address on this machine; check --host"
    : `${e.message}${e.code && !e.message.includes(e.code) ? ` (${e.code})` : ""}`

const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]", "::1"])

const bearerOf = (req: http.IncomingMessage): string | undefined => {
  const header = req.headers.authorization
  if (!header) return undefined
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return match ? match[1] : undefined
}

const sendJson = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  if (res.headersSent) return
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

const jsonRpcError = (code: number, message: string, data?: unknown) => ({
  jsonrpc: "2.0",
  error: data === undefined ? { code, message } : { code, message, data },
  id: null
})

const WWW_AUTHENTICATE = { "www-authenticate": "Bearer realm=\"sophia\"" }

class BodyTooLarge {
  constructor(readonly actual: number) {}
}
class MalformedJson {
  constructor(readonly detail: string) {}
}

/** Read and parse a JSON body, refusing above `limit` bytes without buffering the rest. Empty body = undefined. */
const readJson = (req: http.IncomingMessage, limit: number): Promise<unknown> =>
  new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? "NaN")
    if (Number.isFinite(declared) && declared > limit) {
      req.resume()
      return reject(new BodyTooLarge(declared))
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let failed = false
    req.on("data", (chunk: Buffer) => {
      if (failed) return
      size += chunk.length
      if (size > limit) {
        failed = true
        reject(new BodyTooLarge(size))
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => {
      if (failed) return
      const text = Buffer.concat(chunks).toString("utf8")
      if (text.trim() === "") return resolve(undefined)
      try {
        resolve(JSON.parse(text))
      } catch (e) {
        reject(new MalformedJson(e instanceof Error ? e.message : String(e)))
      }
    })
    req.on("error", reject)
  })

interface Session {
  readonly transport: StreamableHTTPServerTransport
  readonly connectionId: string
  lastSeen: number
}

/** Aborted when the response's connection closes before the response was sent (the client went away). */
const abandonedBy = (res: http.ServerResponse): AbortSignal => {
  const controller = new AbortController()
  res.once("close", () => {
    if (!res.writableFinished) controller.abort()
  })
  return controller.signal
}

/**
 * The reply to a POST is a short SSE stream (usually one event, then the end). The SDK's Node adapter
 * flushes the headers on their own as soon as the reply is not ready within a tick, which a tool call
 * never is: one more loopback write (and one more wake-up of the client) per call. Here the headers wait
 * for the first event; Node corks a response's first write until the next tick, so headers, event and
 * end leave in one write. The standalone GET stream keeps its early headers (the client waits for them).
 */
const sendHeadersWithFirstEvent = (res: http.ServerResponse) => {
  res.flushHeaders = () => {}
}

/**
 * Time a request from now (the daemon has read it) until its response has left (`finish`) or its
 * connection closed first; a long poll counts its whole wait, as a tool call's duration does.
 */
const timeRequest = (res: http.ServerResponse, route: "mcp" | "rest") => {
  const started = performance.now()
  res.once("close", () => recordHttpRequest(route, (performance.now() - started) / 1000))
}

/**
 * How long an idle keep-alive socket stays open: longer than clients keep theirs by default (undici: 4 s),
 * so a client never reuses a socket the server is closing at that instant ("other side closed"). Clients
 * are told (`Keep-Alive: timeout=65`), so an agent that thinks for longer than 4 s between calls keeps its
 * connection instead of opening a new one for the next call (undici keeps it up to the hint less 1 s).
 */
const KEEP_ALIVE_S = 65
/**
 * Node says `Keep-Alive: timeout=…` itself only when it writes the `Connection` header; the SDK's
 * Streamable HTTP responses set `Connection: keep-alive` themselves, so they would go without the hint.
 */
const hintKeepAlive = (res: http.ServerResponse) => res.setHeader("keep-alive", `timeout=${KEEP_ALIVE_S}`)

/** Nothing that matters lives in a session, so an idle one is simply closed (the client re-initializes). */
const SESSION_IDLE_MS = 30 * 60_000
/** Per connection; opening one more closes its least recently used session. */
const SESSIONS_PER_CONNECTION = 16

/**
 * The daemon's HTTP face: Streamable HTTP MCP at `/mcp`, the REST path `/api/tools/<name>`, `/healthz`.
 * Every request is authenticated against the connection row (revocation bites on the next request,
 * even inside an open MCP session); Host and Origin are checked against loopback names and the bound host
 * (DNS-rebinding protection).
 */
export const layer = (config: HttpConfig): Layer.Layer<HttpServer, ListenError, Dispatcher | MetricsScrape> =>
  Layer.scoped(
    HttpServer,
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const metrics = yield* MetricsScrape
      // the owner's portal, when the app provides it: every /portal path is its own (see portal/Routes.ts)
      const portal = yield* Effect.serviceOption(PortalRoutes)
      const runtime = yield* Effect.runtime<never>()
      const runPromise = Runtime.runPromise(runtime)
      const limit = config.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
      const sessions = new Map<string, Session>()
      let port = config.port

      const allowedNames = new Set([...LOOPBACK_NAMES, config.host.toLowerCase()])
      const hostAllowed = (req: http.IncomingMessage) => {
        const host = req.headers.host
        if (!host) return false
        const url = URL.canParse(`http://${host}`) ? new URL(`http://${host}`) : undefined
        if (!url || !allowedNames.has(url.hostname.toLowerCase())) return false
        return url.port === "" || Number(url.port) === port
      }
      const originAllowed = (req: http.IncomingMessage) => {
        const origin = req.headers.origin
        if (!origin) return true
        if (!URL.canParse(origin)) return false
        const url = new URL(origin)
        // a browser page on another local port is another origin too
        const originPort = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
        return allowedNames.has(url.hostname.toLowerCase()) && originPort === port
      }

      const authenticate = (req: http.IncomingMessage): Promise<Caller | undefined> =>
        runPromise(dispatcher.authenticate(bearerOf(req)).pipe(Effect.option)).then((o) =>
          o._tag === "Some" ? o.value : undefined
        )

      const bodyRefusal = (e: unknown) => {
        if (e instanceof BodyTooLarge) {
          return {
            status: 413,
            code: "payload_too_large",
            message: `request body is ${e.actual} bytes; the limit is ${limit} bytes`,
            details: { limit, actual: e.actual, unit: "bytes" }
          }
        }
        if (e instanceof MalformedJson) {
          return { status: 400, code: "validation_error", message: `malformed JSON: ${e.detail}`, details: {} }
        }
        throw e
      }

      const handleRest = async (req: http.IncomingMessage, res: http.ServerResponse, toolName: string) => {
        const caller = await authenticate(req)
        if (!caller) return sendJson(res, 401, { error: "invalid_or_revoked_bearer" }, WWW_AUTHENTICATE)
        let args: unknown
        try {
          args = await readJson(req, limit)
        } catch (e) {
          const r = bodyRefusal(e)
          return sendJson(res, r.status, { error: { code: r.code, message: r.message, ...r.details } })
        }
        let name: string
        try {
          name = decodeURIComponent(toolName)
        } catch {
          return sendJson(res, 400, { error: { code: "validation_error", message: "the tool name in the path is not valid URI encoding" } })
        }
        // a client that goes away ends its call (a long poll does not keep waiting for nobody)
        const gone = abandonedBy(res)
        const outcome = await runPromise(dispatcher.call(caller, name, args ?? {}), { signal: gone }).catch((e) => {
          if (gone.aborted) return undefined
          throw e
        })
        if (outcome === undefined) return
        if (outcome.ok) return sendJson(res, 200, outcome.body)
        return sendJson(res, outcome.refusal ? httpStatusOf(outcome.refusal) : 500, outcome.body)
      }

      const handleMcp = async (req: http.IncomingMessage, res: http.ServerResponse) => {
        const caller = await authenticate(req)
        if (!caller) return sendJson(res, 401, jsonRpcError(-32001, AUTH_MESSAGE), WWW_AUTHENTICATE)
        let body: unknown
        if (req.method === "POST") {
          try {
            body = await readJson(req, limit)
          } catch (e) {
            const r = bodyRefusal(e)
            return sendJson(
              res,
              r.status,
              jsonRpcError(r.status === 413 ? -32600 : -32700, r.message, { code: r.code, ...r.details })
            )
          }
        }
        if (req.method === "POST") sendHeadersWithFirstEvent(res)
        hintKeepAlive(res)
        const bearer = bearerOf(req)!
        const auth: AuthInfo = {
          token: bearer,
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
        if (req.method === "POST" && isInitializeRequest(body)) {
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
            dispatcher,
            naming: config.naming,
            runPromise,
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
          return
        }
        return sendJson(res, 400, jsonRpcError(-32000, "Bad Request: no valid MCP session id; send initialize first"))
      }

      const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
        if (!hostAllowed(req) || !originAllowed(req)) {
          return sendJson(res, 403, { error: "forbidden_host_or_origin" })
        }
        const url = new URL(req.url ?? "/", "http://localhost")
        if (url.pathname.startsWith("/.well-known/")) {
          // a plain 404 so MCP clients do not start an OAuth dance
          res.writeHead(404, { "content-type": "text/plain" })
          return res.end("Not Found")
        }
        if (url.pathname === "/healthz") return sendJson(res, 200, { ok: true })
        if (url.pathname === "/metrics" && req.method === "GET") {
          // no bearer: the Host check above keeps it to the bound interface
          const text = await runPromise(metrics.render([
            { name: "sophia_mcp_sessions", help: "open Streamable HTTP MCP sessions", value: sessions.size }
          ]))
          res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8", "content-length": Buffer.byteLength(text) })
          return res.end(text)
        }
        if (url.pathname === "/mcp") {
          // (the standalone GET stream lives as long as the session: not a request to time)
          if (req.method === "POST") timeRequest(res, "mcp")
          return handleMcp(req, res)
        }
        if ((url.pathname === "/portal" || url.pathname.startsWith("/portal/")) && Option.isSome(portal)) {
          return portal.value.handle(req, res, url)
        }
        const rest = /^\/api\/tools\/([^/]+)$/.exec(url.pathname)
        if (rest && req.method === "POST") {
          timeRequest(res, "rest")
          return handleRest(req, res, rest[1])
        }
        return sendJson(res, 404, { error: "not_found" })
      }

      const server = http.createServer((req, res) => {
        handle(req, res).catch((error) => {
          runPromise(Effect.logError("HTTP request failed", error))
          sendJson(res, 500, { error: "internal_error" })
        })
      })
      // (see KEEP_ALIVE_S; the headers of a request must arrive within the same time)
      server.keepAliveTimeout = KEEP_ALIVE_S * 1000
      server.headersTimeout = KEEP_ALIVE_S * 1000 + 1000

      yield* Effect.acquireRelease(
        Effect.async<void, ListenError>((resume) => {
          server.once("error", (e: NodeJS.ErrnoException) =>
            resume(Effect.fail(new ListenError({ host: config.host, port: config.port, reason: listenReason(e) }))))
          try {
            server.listen(config.port, config.host, () => {
              // after listening, a server error (e.g. EMFILE on accept) is logged, never fatal
              server.on("error", (e) => runPromise(Effect.logError("HTTP server error", e)))
              resume(Effect.void)
            })
          } catch (e) {
            // a bad port or host is refused synchronously
            resume(Effect.fail(new ListenError({ host: config.host, port: config.port, reason: listenReason(e as NodeJS.ErrnoException) })))
          }
        }),
        () =>
          Effect.promise(async () => {
            await Promise.allSettled([...sessions.values()].map((s) => s.transport.close()))
            server.closeAllConnections()
            await new Promise<void>((resolve) => server.close(() => resolve()))
          })
      )
      port = (server.address() as AddressInfo).port

      // close sessions nobody used for a while (clients that vanished without a DELETE)
      const evictIdle = Effect.suspend(() => {
        const cutoff = Date.now() - SESSION_IDLE_MS
        const idle = [...sessions.values()].filter((s) => s.lastSeen < cutoff)
        return Effect.promise(() => Promise.allSettled(idle.map((s) => s.transport.close())))
      })
      yield* evictIdle.pipe(Effect.repeat(Schedule.spaced("1 minute")), Effect.forkScoped)
      const hostForUrl = config.host.includes(":") ? `[${config.host}]` : config.host
      const baseUrl = `http://${hostForUrl === "0.0.0.0" ? "127.0.0.1" : hostForUrl}:${port}`
      return { port, host: config.host, baseUrl, mcpUrl: `${baseUrl}/mcp` }
    })
  )
