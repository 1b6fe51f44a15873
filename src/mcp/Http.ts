import { Context, Effect, Layer, Option, Runtime, Schedule, Schema } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import type { Caller } from "../domain/Auth.js"
import { MetricsScrape, recordHttpRequest } from "../observability/Metrics.js"
import { Daemons } from "../services/Daemons.js"
import { Hooks } from "../services/Hooks.js"
import { Dispatcher } from "./Dispatch.js"
import { makeHookRoute } from "./HookRoute.js"
import { bearerOf, hostGuard, KEEP_ALIVE_S, sendJson } from "./HttpBasics.js"
import { makeMcpSessions } from "./McpSessions.js"
import { makeRestRoute } from "./RestRoute.js"
import { PortalRoutes } from "./portal/Routes.js"
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

/**
 * Time a request from now (the daemon has read it) until its response has left (`finish`) or its
 * connection closed first; a long poll counts its whole wait, as a tool call's duration does.
 */
const timeRequest = (res: http.ServerResponse, route: "mcp" | "rest") => {
  const started = performance.now()
  res.once("close", () => recordHttpRequest(route, (performance.now() - started) / 1000))
}

/** 405 with the method the path takes (`Allow`) and what it does. */
const methodNotAllowed = (res: http.ServerResponse, allow: string, hint: string) =>
  sendJson(res, 405, { error: { code: "method_not_allowed", message: `this path takes ${allow} only`, hint } }, { allow })

/** Listen on the configured host and port; a failure to is a `ListenError` (one line), later server errors are logged. */
const listen = (server: http.Server, config: HttpConfig, runPromise: <A>(effect: Effect.Effect<A>) => Promise<A>) =>
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
  })

/**
 * The daemon's HTTP face: Streamable HTTP MCP at `/mcp`, the REST path `/api/tools/<name>`, agent runtimes'
 * hooks at `/hooks/claude-code`, `/healthz`.
 * Every request is authenticated against the connection row (revocation bites on the next request,
 * even inside an open MCP session); Host and Origin are checked against loopback names and the bound host
 * (DNS-rebinding protection).
 */
export const layer = (config: HttpConfig): Layer.Layer<HttpServer, ListenError, Dispatcher | MetricsScrape | Daemons | Hooks> =>
  Layer.scoped(
    HttpServer,
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const metrics = yield* MetricsScrape
      const daemons = yield* Daemons
      const hooks = yield* Hooks
      // the owner's portal, when the app provides it: every /portal path is its own (see portal/Routes.ts)
      const portal = yield* Effect.serviceOption(PortalRoutes)
      const runtime = yield* Effect.runtime<never>()
      const runPromise = Runtime.runPromise(runtime)
      const limit = config.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES
      let port = config.port

      const guard = hostGuard(config.host, () => port)
      const authenticate = (req: http.IncomingMessage): Promise<Caller | undefined> =>
        runPromise(dispatcher.authenticate(bearerOf(req)).pipe(Effect.option)).then((o) =>
          o._tag === "Some" ? o.value : undefined
        )

      const rest = makeRestRoute({ dispatcher, runPromise, authenticate, limit })
      const mcp = makeMcpSessions({ dispatcher, naming: config.naming, runPromise, authenticate, limit })
      const hookRoute = makeHookRoute({ hooks, runPromise, authenticate, limit })

      const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
        if (!guard.hostAllowed(req) || !guard.originAllowed(req)) {
          return sendJson(res, 403, { error: "forbidden_host_or_origin" })
        }
        // a request target no URL parser takes (`//[`) is the client's error, never the daemon's
        const url = URL.canParse(req.url ?? "/", "http://localhost") ? new URL(req.url ?? "/", "http://localhost") : undefined
        if (url === undefined) {
          req.resume()
          return sendJson(res, 400, { error: { code: "validation_error", message: "the request target is not a valid URL path" } })
        }
        if (url.pathname.startsWith("/.well-known/")) {
          // a plain 404 so MCP clients do not start an OAuth dance
          res.writeHead(404, { "content-type": "text/plain" })
          return res.end("Not Found")
        }
        // the instance id tells `sophia portal` this is the daemon recorded for its database
        if (url.pathname === "/healthz") return sendJson(res, 200, { ok: true, instance: daemons.instanceId() })
        if (url.pathname === "/metrics" && req.method === "GET") {
          // no bearer: the Host check above keeps it to the bound interface
          const text = await runPromise(metrics.render([
            { name: "sophia_mcp_sessions", help: "open Streamable HTTP MCP sessions", value: mcp.size() }
          ]))
          res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8", "content-length": Buffer.byteLength(text) })
          return res.end(text)
        }
        if (url.pathname === "/mcp") {
          // (the standalone GET stream lives as long as the session: not a request to time)
          if (req.method === "POST") timeRequest(res, "mcp")
          return mcp.handle(req, res)
        }
        if ((url.pathname === "/portal" || url.pathname.startsWith("/portal/")) && Option.isSome(portal)) {
          return portal.value.handle(req, res, url)
        }
        if (url.pathname === "/hooks/claude-code") {
          return req.method === "POST"
            ? hookRoute.claudeCode(req, res)
            : methodNotAllowed(res, "POST", "POST /hooks/claude-code with the hook's input as its JSON body")
        }
        if (url.pathname === "/api/tools" || url.pathname === "/api/tools/") {
          return req.method === "GET" ? rest.list(req, res) : methodNotAllowed(res, "GET", "GET /api/tools lists the tools")
        }
        const toolPath = /^\/api\/tools\/([^/]+)$/.exec(url.pathname)
        if (toolPath) {
          if (req.method !== "POST") {
            return methodNotAllowed(res, "POST", "POST /api/tools/<tool> with the arguments as its JSON body calls the tool")
          }
          timeRequest(res, "rest")
          return rest.handle(req, res, toolPath[1])
        }
        return sendJson(res, 404, {
          error: { code: "not_found", message: `no route ${url.pathname}`, hint: "MCP is POST /mcp; the REST path is /api/tools (GET lists the tools)" }
        })
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
        listen(server, config, runPromise),
        () =>
          Effect.promise(async () => {
            await mcp.closeAll()
            server.closeAllConnections()
            await new Promise<void>((resolve) => server.close(() => resolve()))
          })
      )
      port = (server.address() as AddressInfo).port

      // close sessions nobody used for a while (clients that vanished without a DELETE)
      yield* Effect.promise(mcp.closeIdle).pipe(Effect.repeat(Schedule.spaced("1 minute")), Effect.forkScoped)
      const hostForUrl = config.host.includes(":") ? `[${config.host}]` : config.host
      const baseUrl = `http://${hostForUrl === "0.0.0.0" ? "127.0.0.1" : hostForUrl}:${port}`
      return { port, host: config.host, baseUrl, mcpUrl: `${baseUrl}/mcp` }
    })
  )
