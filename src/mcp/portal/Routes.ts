import { Context, Effect, Either, Fiber, Layer, Option, Queue, Runtime, Schedule } from "effect"
import * as fs from "node:fs"
import type * as http from "node:http"
import type { Caller, ConnectionInfo } from "../../domain/Auth.js"
import { connectionShort, ConnectionId, PROFILES, UserId } from "../../domain/Auth.js"
import type { DomainEvent } from "../../domain/Events.js"
import type { PortalSession } from "../../domain/Portal.js"
import { PORTAL_COOKIE } from "../../domain/Portal.js"
import { Approvals } from "../../services/Approvals.js"
import { Auth } from "../../services/Auth.js"
import { Coordination } from "../../services/Coordination.js"
import { Events } from "../../services/Events.js"
import { Knowledge } from "../../services/Knowledge.js"
import { Ledger } from "../../services/Ledger.js"
import { Portal } from "../../services/Portal.js"
import { Waits } from "../../services/Waits.js"
import { Dispatcher } from "../Dispatch.js"
import { waitGraphSvg } from "./Graph.js"
import type { Html } from "./Html.js"
import { html } from "./Html.js"
import * as Pages from "./Pages.js"

/**
 * The owner's portal under `/portal` (DESIGN "The owner's portal"): server-rendered pages, small vanilla
 * JS for live updates over Server-Sent Events, every asset served from this folder. `Http.ts` hands it
 * every `/portal` path. Thin like the rest of src/mcp: sessions, CSRF tokens and the portal's identity
 * are the Portal service's; reads and actions are the services' (or tool calls through the Dispatcher,
 * as the portal's own connection with the `portal` profile — journaled as the owner's, no elevated gate).
 */
export class PortalRoutes extends Context.Tag("sophia/PortalRoutes")<PortalRoutes, {
  readonly handle: (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => Promise<void>
}>() {}

const ASSETS: Record<string, string> = {
  "portal.css": "text/css; charset=utf-8",
  "portal.js": "text/javascript; charset=utf-8"
}
/**
 * The assets folder: beside this module (src/ under tsx, dist/mcp/portal/ in the library build), or — from a
 * chunk of the bundled CLI in dist/cli/ — the library build's copy (scripts/build.mjs copies it there).
 */
const assetsDir = () => {
  const candidates = [new URL("./assets/", import.meta.url), new URL("../mcp/portal/assets/", import.meta.url)]
  return candidates.find((dir) => fs.existsSync(new URL("portal.css", dir))) ?? candidates[0]!
}
const loadAssets = () => {
  const dir = assetsDir()
  return new Map(Object.entries(ASSETS).map(([name, type]) => [name, { type, body: fs.readFileSync(new URL(name, dir)) }]))
}

const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY"
}

const MAX_FORM_BYTES = 64 * 1024

const cookieOf = (req: http.IncomingMessage, name: string): string | undefined => {
  const header = req.headers.cookie
  if (!header) return undefined
  for (const part of header.split(";")) {
    const i = part.indexOf("=")
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim()
  }
  return undefined
}

const readForm = (req: http.IncomingMessage): Promise<URLSearchParams | undefined> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    let over = false
    req.on("data", (c: Buffer) => {
      size += c.length
      if (size > MAX_FORM_BYTES) over = true
      else chunks.push(c)
    })
    req.on("end", () => resolve(over ? undefined : new URLSearchParams(Buffer.concat(chunks).toString("utf8"))))
    req.on("error", reject)
  })

const send = (res: http.ServerResponse, status: number, body: string | Html, headers: Record<string, string> = {}) => {
  if (res.headersSent) return
  const text = typeof body === "string" ? body : body.text
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    ...SECURITY_HEADERS,
    ...headers
  })
  res.end(text)
}

const redirect = (res: http.ServerResponse, location: string, headers: Record<string, string> = {}) => {
  res.writeHead(303, { location, "cache-control": "no-store", ...SECURITY_HEADERS, ...headers })
  res.end()
}

/** A page path with a notice or an error for the next render (Post/Redirect/Get). */
const back = (path: string, kind: "notice" | "error", message: string) =>
  `${path}${path.includes("?") ? "&" : "?"}${kind}=${encodeURIComponent(message.slice(0, 300))}`

const callerOf = (info: ConnectionInfo): Caller => ({
  userId: UserId.make(info.user_id),
  connectionId: ConnectionId.make(info.connection_id),
  connectionShort: connectionShort(info.connection_id),
  name: info.name,
  profile: info.profile,
  entityScope: info.entity_scope
})

/** Which live regions a committed event refreshes (the names `data-live` lists). */
const liveNamesOf = (event: DomainEvent): ReadonlyArray<string> => {
  switch (event._tag) {
    case "PostLanded":
      return event.channel === "waits" ? ["posts", "waits", "fleet"] : ["posts", "fleet"]
    case "WaitResolved":
      return ["waits", "fleet"]
    case "ConnectionRevoked":
      return ["fleet", "waits"]
    case "ApprovalRequested":
    case "ApprovalDecided":
      return ["approvals"]
    case "LedgerAppended":
      return ["ledger", "fleet"]
  }
}

/** The owner's portal lists every user's approvals; everything else it shows is the session user's. */
const ownerSees = (event: DomainEvent, session: PortalSession) =>
  event._tag === "ApprovalRequested" || event._tag === "ApprovalDecided" || event.user_id === session.user_id

export const PortalRoutesLive = Layer.effect(
  PortalRoutes,
  Effect.gen(function*() {
    const dispatcher = yield* Dispatcher
    const portal = yield* Portal
    const auth = yield* Auth
    const approvals = yield* Approvals
    const coordination = yield* Coordination
    const waits = yield* Waits
    const ledger = yield* Ledger
    const knowledge = yield* Knowledge
    const events = yield* Events
    const runtime = yield* Effect.runtime<never>()
    const runPromise = Runtime.runPromise(runtime)
    const runFork = Runtime.runFork(runtime)
    const assets = loadAssets()

    /** A tool call as the portal: the body on success, a refusal's message as a failure. */
    const tool = (caller: Caller, name: string, args: Record<string, unknown>) =>
      Effect.flatMap(dispatcher.call(caller, name, args), (o) =>
        o.ok ? Effect.succeed(o.body as any) : Effect.fail(String((o.body.error as any).message ?? o.body.error.code))
      )

    const namesOf = auth.names

    // ---------------------------------------------------------------- pages (each an Effect of its live region)

    const fleet = (frame: Pages.Frame, caller: Caller) =>
      Effect.gen(function*() {
        const all = yield* auth.list()
        const users = [...new Set(all.map((c) => c.user_id))]
        const openWaits = new Map<string, number>()
        const portalIds = new Set<string>()
        for (const userId of users) {
          const any = all.find((c) => c.user_id === userId)!
          const graph = yield* waits.graph(callerOf(any))
          for (const e of graph.edges) openWaits.set(e.waiter.connection_id, (openWaits.get(e.waiter.connection_id) ?? 0) + 1)
          const own = yield* portal.connectionOf(userId)
          if (Option.isSome(own)) portalIds.add(own.value)
        }
        const rows = yield* Effect.forEach(all, (info) =>
          info.revoked_at !== null
            ? Effect.succeed({ info, unread: 0, openWaits: 0, claimed: [], isPortal: false })
            : Effect.map(
              Effect.all([coordination.unreadCount(callerOf(info)), ledger.claimedBy(info.user_id, info.connection_id)]),
              ([unread, claimed]) => ({
                info,
                unread,
                openWaits: openWaits.get(info.connection_id) ?? 0,
                claimed,
                isPortal: portalIds.has(info.connection_id)
              })
            ))
        void caller
        return Pages.fleetBody(frame.csrf, rows)
      })

    const approvalsPage = (frame: Pages.Frame) =>
      Effect.gen(function*() {
        const pending = yield* approvals.list()
        const all = yield* approvals.list({ all: true })
        const recent = all.filter((a) => a.status !== "pending").slice(-20).reverse()
        return Pages.approvalsBody(frame.csrf, pending, recent)
      })

    const channels = (caller: Caller, selected: string | undefined) =>
      Effect.gen(function*() {
        const listing = yield* tool(caller, "sophia.coordination_inbox", {
          peek: true,
          include_archived: true,
          include_heartbeats: true,
          limit: 1
        })
        const posts = selected === undefined ? [] : (yield* tool(caller, "sophia.coordination_inbox", {
          channel: selected,
          peek: true,
          unread_only: false,
          include_heartbeats: true,
          include_archived: true,
          limit: 200
        })).posts
        return Pages.channelsBody(listing.channels, selected, posts)
      })

    const waitsPage = (caller: Caller) =>
      Effect.gen(function*() {
        const graph = yield* tool(caller, "sophia.wait_graph", {})
        const orphanedWaits = new Map<string, string>(
          (graph.orphaned?.waits ?? []).map((o: any) => [o.wait_id, o.why ?? o.reason ?? "orphaned"] as const)
        )
        const svg = waitGraphSvg({
          edges: graph.edges,
          cycles: graph.cycles.map((c: Array<any>) => c.slice(0, -1).map((r) => r.connection_id)),
          orphanedWaits
        })
        return Pages.waitsBody(graph, svg)
      })

    const ledgerPage = (caller: Caller, query: URLSearchParams) =>
      Effect.gen(function*() {
        const work = query.get("work")
        if (!work) {
          const items = yield* ledger.listWork(caller.userId, 200)
          const names = yield* namesOf(items.flatMap((i) => (i.claimant ? [i.claimant] : [])))
          return Pages.ledgerListBody(items, names)
        }
        const status = yield* tool(caller, "sophia.ledger_status", { work_id: work })
        const events = [...(yield* ledger.events(caller.userId, work))]
        const from = query.get("from") ?? undefined
        const to = query.get("to") ?? undefined
        const diff = from ? yield* tool(caller, "sophia.ledger_diff", { work_id: work, from, ...(to ? { to } : {}) }) : undefined
        const names = yield* namesOf(events.map((e: any) => e.actor).concat(status.settled.claimant ? [status.settled.claimant] : []))
        return Pages.ledgerItemBody(status, events, diff, names, from, to)
      })

    const knowledgePage = (frame: Pages.Frame, caller: Caller, query: URLSearchParams) =>
      Effect.gen(function*() {
        const q = (query.get("q") ?? "").trim()
        const documents = q === "" ? [] : (yield* tool(caller, "sophia.search_documents", { query: q, limit: 50 })).items
        const facts = (yield* tool(caller, "sophia.query_knowledge", { limit: 100 })).facts
        const journal = yield* knowledge.mutations(caller, 50)
        const names = yield* namesOf(journal.map((m) => m.connection_id))
        return Pages.knowledgeBody(frame.csrf, q, documents, facts, journal, names)
      })

    // ---------------------------------------------------------------- request handling

    const PAGES: Record<string, { readonly name: Pages.PageName; readonly live: ReadonlyArray<string> }> = {
      "/portal": { name: "Fleet", live: ["fleet", "posts", "waits", "ledger"] },
      "/portal/approvals": { name: "Approvals", live: ["approvals"] },
      "/portal/channels": { name: "Channels", live: ["posts"] },
      "/portal/waits": { name: "Waits", live: ["waits"] },
      "/portal/ledger": { name: "Ledger", live: ["ledger"] },
      "/portal/knowledge": { name: "Knowledge", live: [] }
    }

    const regionOf = (path: string, frame: Pages.Frame, caller: Caller, query: URLSearchParams): Effect.Effect<Html, string> => {
      switch (path) {
        case "/portal":
          return fleet(frame, caller)
        case "/portal/approvals":
          return approvalsPage(frame)
        case "/portal/channels":
          return channels(caller, query.get("channel") ?? undefined)
        case "/portal/waits":
          return waitsPage(caller)
        case "/portal/ledger":
          return ledgerPage(caller, query)
        default:
          return knowledgePage(frame, caller, query)
      }
    }

    const renderPage = (
      res: http.ServerResponse,
      path: string,
      session: PortalSession,
      query: URLSearchParams,
      options: { readonly fragment?: boolean; readonly extra?: Html; readonly notice?: string; readonly status?: number } = {}
    ) =>
      runPromise(Effect.gen(function*() {
        const page = PAGES[path]
        const caller = yield* portal.callerFor(session.user_id)
        const frame: Pages.Frame = {
          csrf: session.csrf,
          page: page.name,
          notice: options.notice ?? query.get("notice") ?? undefined,
          error: query.get("error") ?? undefined
        }
        const region = yield* Effect.either(regionOf(path, frame, caller, query))
        const body = Either.isRight(region) ? region.right : html`<p class="error" role="alert">${region.left}</p>`
        if (options.fragment === true) return send(res, 200, body)
        const extra = path === "/portal"
          ? html`${options.extra ?? ""}${Pages.createForm(session.csrf)}`
          : path === "/portal/ledger" && !query.get("work")
          ? html`${options.extra ?? ""}${Pages.form(session.csrf, "/portal/ledger/verify", "Verify ledger")}`
          : options.extra ?? html``
        send(res, options.status ?? 200, Pages.layoutPage(frame, page.live, body, extra))
      }))

    /** Every owner action: decoded form in, one service call (or tool call as the portal), a redirect out. */
    const action = (req: http.IncomingMessage, res: http.ServerResponse, path: string, session: PortalSession, form: URLSearchParams) =>
      runPromise(Effect.gen(function*() {
        const caller = yield* portal.callerFor(session.user_id)
        let m: RegExpExecArray | null
        if (path === "/portal/logout") {
          yield* portal.logout(session.session_id)
          return redirect(res, "/portal/login", { "set-cookie": `${PORTAL_COOKIE}=; HttpOnly; SameSite=Strict; Path=/portal; Max-Age=0` })
        }
        if (path === "/portal/connections") {
          const profile = form.get("profile") ?? ""
          if (!(PROFILES as ReadonlyArray<string>).includes(profile)) return redirect(res, back("/portal", "error", `unknown profile ${profile}`))
          const minted = yield* Effect.either(auth.createConnection({
            name: form.get("name") ?? "",
            profile: profile as (typeof PROFILES)[number],
            scope: (form.get("scope") ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0)
          }))
          if (Either.isLeft(minted)) return redirect(res, back("/portal", "error", minted.left.message))
          // the bearer is shown once: rendered into this response, never into a URL
          return yield* Effect.promise(() =>
            renderPage(res, "/portal", session, new URLSearchParams(), {
              extra: Pages.mintedBody(minted.right, `http://${req.headers.host}/mcp`),
              notice: `created ${minted.right.name}`
            })
          )
        }
        if ((m = /^\/portal\/connections\/([0-9a-f-]{36})\/(rename|revoke)$/.exec(path))) {
          const [, id, verb] = m
          const target = yield* auth.get(id)
          if (Option.isNone(target)) return redirect(res, back("/portal", "error", `no connection ${id}`))
          const outcome = yield* Effect.either(
            verb === "revoke" ? auth.revoke(id, target.value.user_name) : auth.rename(id, form.get("name") ?? "", target.value.user_name)
          )
          return Either.isLeft(outcome)
            ? redirect(res, back("/portal", "error", outcome.left.message))
            : redirect(res, back("/portal", "notice", verb === "revoke" ? `revoked ${outcome.right.name}` : `renamed to ${outcome.right.name}`))
        }
        if ((m = /^\/portal\/approvals\/([^/]+)\/(approve|deny)$/.exec(path))) {
          const [, id, verb] = m
          const outcome = yield* Effect.either(approvals.decide(decodeURIComponent(id), verb === "approve" ? "approved" : "denied", "portal"))
          return Either.isLeft(outcome)
            ? redirect(res, back("/portal/approvals", "error", outcome.left.message))
            : redirect(res, back("/portal/approvals", "notice", `${outcome.right.status}: ${outcome.right.tool} by ${outcome.right.connection_name}`))
        }
        if (path === "/portal/ledger/verify") {
          const report = yield* ledger.verify()
          return yield* Effect.promise(() =>
            renderPage(res, "/portal/ledger", session, new URLSearchParams(), { extra: Pages.verifyResult(report) })
          )
        }
        if ((m = /^\/portal\/knowledge\/mutations\/([^/]+)\/revert$/.exec(path))) {
          const id = decodeURIComponent(m[1])
          const outcome = yield* Effect.either(tool(caller, "sophia.revert_mutation", { mutation_id: id }))
          return Either.isLeft(outcome)
            ? redirect(res, back("/portal/knowledge", "error", outcome.left))
            : redirect(res, back("/portal/knowledge", "notice", `reverted ${id}`))
        }
        send(res, 404, Pages.messagePage("Not found", "No such portal action."))
      }))

    /** The live stream: committed domain events, as SSE event names. */
    const stream = (req: http.IncomingMessage, res: http.ServerResponse, session: PortalSession) => {
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
        connection: "keep-alive",
        ...SECURITY_HEADERS
      })
      res.write("retry: 1000\n\n")
      const write = (name: string, data: unknown) => Effect.sync(() => void res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`))
      const program = Effect.scoped(Effect.gen(function*() {
        const queue = yield* events.listen
        yield* write("ready", { at: new Date().toISOString() })
        const pump = Queue.take(queue).pipe(
          Effect.flatMap((event) =>
            !ownerSees(event, session)
              ? Effect.void
              : Effect.forEach(liveNamesOf(event), (name) => write(name, event), { discard: true })
          ),
          Effect.forever
        )
        const heartbeat = Effect.sync(() => void res.write(": keep-alive\n\n")).pipe(Effect.repeat(Schedule.spaced("15 seconds")))
        // the session may be logged out or expire while the stream is open: it then ends
        const stillValid = portal.session(cookieOf(req, PORTAL_COOKIE)).pipe(
          Effect.repeat({ schedule: Schedule.spaced("5 seconds"), while: Option.isSome })
        )
        yield* Effect.raceFirst(Effect.all([pump, heartbeat], { concurrency: "unbounded", discard: true }), stillValid)
      }))
      const fiber = runFork(program.pipe(Effect.ensuring(Effect.sync(() => res.end()))))
      req.on("close", () => runFork(Fiber.interrupt(fiber)))
    }

    const login = async (res: http.ServerResponse, token: string | null) => {
      const opened = await runPromise(Effect.either(portal.redeem(token ?? "")))
      if (Either.isLeft(opened)) return send(res, 401, Pages.messagePage("Login link refused", opened.left.message))
      const s = opened.right
      redirect(res, "/portal", {
        "set-cookie": `${PORTAL_COOKIE}=${s.session_token}; HttpOnly; SameSite=Strict; Path=/portal; Max-Age=${s.max_age_s}`
      })
    }

    const handle = async (req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> => {
      const path = url.pathname.length > 7 && url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname
      // a bearer opens nothing under /portal (the portal is the owner's cookie session, never an agent's)
      if (req.headers.authorization !== undefined) {
        return send(res, 401, Pages.messagePage("Not for bearers", "A bearer opens nothing under /portal; log in with `sophia portal`."))
      }
      const asset = /^\/portal\/assets\/([a-z.]+)$/.exec(path)
      if (asset && req.method === "GET") {
        const a = assets.get(asset[1])
        if (!a) return send(res, 404, Pages.messagePage("Not found", "No such asset."))
        res.writeHead(200, { "content-type": a.type, "content-length": a.body.length, "cache-control": "no-cache", ...SECURITY_HEADERS })
        res.end(a.body)
        return
      }
      if (path === "/portal/login" && req.method === "GET") {
        if (!url.searchParams.has("token")) {
          return send(res, 200, Pages.messagePage("Log in", "Run `sophia portal` on the daemon's machine and open the one-time link it prints."))
        }
        return login(res, url.searchParams.get("token"))
      }
      if (req.method === "POST") {
        // every state change: same-origin Origin, a session, and the session's CSRF token — else 403
        const origin = req.headers.origin
        if (origin === undefined || origin !== `http://${req.headers.host}`) {
          req.resume()
          return send(res, 403, Pages.messagePage("Forbidden", "A portal action needs a same-origin Origin header."))
        }
        const session = await runPromise(portal.session(cookieOf(req, PORTAL_COOKIE)))
        const form = await readForm(req)
        if (Option.isNone(session)) return send(res, 401, Pages.messagePage("Not logged in", "Your session ended; run `sophia portal` for a new login link."))
        if (form === undefined || !portal.csrfMatches(session.value, form.get("_csrf"))) {
          return send(res, 403, Pages.messagePage("Forbidden", "This action is missing its CSRF token (reload the page and try again)."))
        }
        return action(req, res, path, session.value, form)
      }
      if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, Pages.messagePage("Method not allowed", "GET or POST only."))
      const session = await runPromise(portal.session(cookieOf(req, PORTAL_COOKIE)))
      if (Option.isNone(session)) {
        return send(res, 401, Pages.messagePage("Not logged in", "Run `sophia portal` on the daemon's machine and open the one-time link it prints."))
      }
      if (path === "/portal/events") return stream(req, res, session.value)
      if (PAGES[path] === undefined) return send(res, 404, Pages.messagePage("Not found", "No such portal page."))
      return renderPage(res, path, session.value, url.searchParams, { fragment: req.headers["x-portal-live"] === "1" })
    }

    return { handle }
  })
)
