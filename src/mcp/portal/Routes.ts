import { Context, Effect, Either, Layer, Option, Runtime } from "effect"
import type * as http from "node:http"
import type { PortalSession } from "../../domain/Portal.js"
import { Portal } from "../../services/Portal.js"
import { makeActions } from "./Actions.js"
import type { Html } from "./Html.js"
import { html } from "./Html.js"
import { makeLiveStream } from "./Live.js"
import * as Pages from "./Pages.js"
import { makeRegions, PAGES } from "./Regions.js"
import { loadAssets, percentDecoded, readForm, redirect, send, sessionCookieOf, setSessionCookie, wellEncoded } from "./Web.js"

/**
 * The owner's portal under `/portal` (docs/architecture.md, "The owner's portal"): server-rendered pages,
 * small vanilla JS for live updates over Server-Sent Events, every asset served from this folder.
 * `Http.ts` hands it every `/portal` path. Thin like the rest of src/mcp: this file routes a request and
 * checks who sends it (a session; for a change, a same-origin Origin and the session's CSRF token);
 * sessions and the portal's identity are the Portal service's, the pages' reads the services' (Regions),
 * the owner's actions one service call each (Actions), the live stream the domain events (Live).
 */
export class PortalRoutes extends Context.Tag("sophia/PortalRoutes")<PortalRoutes, {
  readonly handle: (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => Promise<void>
}>() {}

const LOGIN_HINT = "Run `sophia portal` on the daemon's machine and open the one-time link it prints."

/**
 * What a session opened by an approve link may do: see its approval (`/portal/approvals?approval=<id>`, and the
 * live stream that refreshes it), approve or deny it, log out. Nothing else.
 */
const scopedAllows = (approvalId: string, method: "GET" | "POST", path: string, query?: URLSearchParams) =>
  method === "POST"
    ? path === "/portal/logout" || path === `/portal/approvals/${encodeURIComponent(approvalId)}/approve` ||
      path === `/portal/approvals/${encodeURIComponent(approvalId)}/deny`
    : path === "/portal/events" || (path === "/portal/approvals" && query?.get("approval") === approvalId)

const approvalPage = (approvalId: string) => `/portal/approvals?approval=${encodeURIComponent(approvalId)}`

const scopedRefusal = (res: http.ServerResponse, approvalId: string) =>
  send(res, 403, Pages.messagePage("Forbidden", `This session was opened by an approve link: it opens approval ${approvalId} only.`))

/** The 400 of an address or a form that is not well-formed percent-encoding (a browser never sends one). */
const badEncoding = (res: http.ServerResponse, what: string) =>
  send(res, 400, Pages.messagePage("Bad request", `${what} is not valid percent-encoding: each % must start a %XX escape of UTF-8.`))

export const PortalRoutesLive = Layer.effect(
  PortalRoutes,
  Effect.gen(function*() {
    const portal = yield* Portal
    const { regionOf } = yield* makeRegions
    const { act } = yield* makeActions
    const { stream } = yield* makeLiveStream
    const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
    const assets = loadAssets()

    /** A page (or, for the live script, only its region), as the portal's connection sees it for the session's user. */
    const renderPage = (
      res: http.ServerResponse,
      path: string,
      session: PortalSession,
      query: URLSearchParams,
      options: { readonly fragment?: boolean; readonly extra?: Html; readonly notice?: string | undefined } = {}
    ) =>
      runPromise(Effect.gen(function*() {
        const page = PAGES[path]!
        const caller = yield* portal.callerFor(session.user_id)
        const frame: Pages.Frame = {
          csrf: session.csrf,
          page: page.name,
          notice: options.notice ?? query.get("notice") ?? undefined,
          error: query.get("error") ?? undefined,
          scoped: session.approval_id !== null
        }
        const region = yield* Effect.either(regionOf(path, { frame, caller, query }))
        const body = Either.isRight(region) ? region.right : html`<p class="error" role="alert">${region.left}</p>`
        if (options.fragment === true) return send(res, 200, body)
        const extra = html`${options.extra ?? ""}${page.extra?.(session.csrf, query) ?? ""}`
        send(res, 200, Pages.layoutPage(frame, page.live, body, extra))
      }))

    /** A state change, checked: same-origin Origin, a session, and the session's CSRF token — else 401/403. */
    const post = async (req: http.IncomingMessage, res: http.ServerResponse, path: string) => {
      const origin = req.headers.origin
      if (origin === undefined || origin !== `http://${req.headers.host}`) {
        req.resume()
        return send(res, 403, Pages.messagePage("Forbidden", "A portal action needs a same-origin Origin header."))
      }
      const session = await runPromise(portal.session(sessionCookieOf(req)))
      const form = await readForm(req)
      if (Option.isNone(session)) return send(res, 401, Pages.messagePage("Not logged in", "Your session ended; run `sophia portal` for a new login link."))
      if (form === "malformed") return badEncoding(res, "The form")
      if (form === "too_large") return send(res, 413, Pages.messagePage("Too large", "A portal form is at most 64 KiB."))
      if (!portal.csrfMatches(session.value, form.get("_csrf"))) {
        return send(res, 403, Pages.messagePage("Forbidden", "This action is missing its CSRF token (reload the page and try again)."))
      }
      const scope = session.value.approval_id
      if (scope !== null && !scopedAllows(scope, "POST", path)) return scopedRefusal(res, scope)
      const outcome = await runPromise(act(path, session.value, form, `http://${req.headers.host}/mcp`))
      switch (outcome._tag) {
        case "Redirect":
          // a decision made by an approve link's session comes back to its approval (the listing is not its to see)
          return redirect(
            res,
            scope !== null && outcome.location.startsWith("/portal/approvals?")
              ? outcome.location.replace("/portal/approvals?", `${approvalPage(scope)}&`)
              : outcome.location,
            outcome.headers
          )
        case "Render":
          return renderPage(res, outcome.path, session.value, new URLSearchParams(), { extra: outcome.extra, notice: outcome.notice })
        case "NoSuchAction":
          return send(res, 404, Pages.messagePage("Not found", "No such portal action."))
        case "BadRequest":
          return send(res, 400, Pages.messagePage("Bad request", outcome.message))
      }
    }

    const login = async (res: http.ServerResponse, token: string | null) => {
      const opened = await runPromise(Effect.either(portal.redeem(token ?? "")))
      if (Either.isLeft(opened)) return send(res, 401, Pages.messagePage("Login link refused", opened.left.message))
      redirect(res, "/portal", { "set-cookie": setSessionCookie(opened.right.session_token, opened.right.max_age_s) })
    }

    /**
     * An approve link (a notification's `links.approve`): with a session that may see the approval already, straight
     * to it (the token is not spent); else the token is redeemed, once and within 15 minutes, into a session that
     * sees and decides that approval only.
     */
    const approveLink = async (req: http.IncomingMessage, res: http.ServerResponse, approvalId: string, token: string | null) => {
      const current = await runPromise(portal.session(sessionCookieOf(req)))
      if (Option.isSome(current) && (current.value.approval_id === null || current.value.approval_id === approvalId)) {
        return redirect(res, approvalPage(approvalId))
      }
      const opened = await runPromise(Effect.either(portal.redeemApproveLink(token ?? "", approvalId)))
      if (Either.isLeft(opened)) return send(res, 401, Pages.messagePage("Approve link refused", opened.left.message))
      redirect(res, approvalPage(approvalId), { "set-cookie": setSessionCookie(opened.right.session_token, opened.right.max_age_s) })
    }

    const handle = async (req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> => {
      // an address no browser would send is refused before anything reads it (every id in a path is decoded later)
      if (!wellEncoded(url.pathname) || !wellEncoded(url.search.slice(1))) {
        req.resume()
        return badEncoding(res, "The address")
      }
      const path = url.pathname.length > 7 && url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname
      // a bearer opens nothing under /portal (the portal is the owner's cookie session, never an agent's)
      if (req.headers.authorization !== undefined) {
        return send(res, 401, Pages.messagePage("Not for bearers", "A bearer opens nothing under /portal; log in with `sophia portal`."))
      }
      const asset = /^\/portal\/assets\/([a-z.]+)$/.exec(path)
      if (asset && req.method === "GET") {
        if (!assets.serve(asset[1], res)) send(res, 404, Pages.messagePage("Not found", "No such asset."))
        return
      }
      if (path === "/portal/login" && req.method === "GET") {
        if (!url.searchParams.has("token")) return send(res, 200, Pages.messagePage("Log in", LOGIN_HINT))
        return login(res, url.searchParams.get("token"))
      }
      const approve = /^\/portal\/approve\/([^/]+)$/.exec(path)
      if (approve && req.method === "GET") {
        const id = percentDecoded(approve[1])
        if (id === undefined) return badEncoding(res, "The address")
        return approveLink(req, res, id, url.searchParams.get("token"))
      }
      if (req.method === "POST") return post(req, res, path)
      if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, Pages.messagePage("Method not allowed", "GET or POST only."))
      const session = await runPromise(portal.session(sessionCookieOf(req)))
      if (Option.isNone(session)) return send(res, 401, Pages.messagePage("Not logged in", LOGIN_HINT))
      const scope = session.value.approval_id
      if (scope !== null && !scopedAllows(scope, "GET", path, url.searchParams)) return scopedRefusal(res, scope)
      if (path === "/portal/events") return stream(req, res, session.value)
      if (PAGES[path] === undefined) return send(res, 404, Pages.messagePage("Not found", "No such portal page."))
      return renderPage(res, path, session.value, url.searchParams, { fragment: req.headers["x-portal-live"] === "1" })
    }

    return { handle } as const
  })
)
