import { Effect, Either, Option, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { Profile } from "../../domain/Auth.js"
import type { PortalSession } from "../../domain/Portal.js"
import { Approvals } from "../../services/Approvals.js"
import { Auth } from "../../services/Auth.js"
import { Leases } from "../../services/Leases.js"
import { Ledger } from "../../services/Ledger.js"
import { Notifications } from "../../services/Notifications.js"
import { Portal } from "../../services/Portal.js"
import { Dispatcher } from "../Dispatch.js"
import { newConnectionConfigs, PortalDaemon } from "./Daemon.js"
import type { Html } from "./Html.js"
import * as Pages from "./Pages.js"
import { back, clearSessionCookie, percentDecoded } from "./Web.js"

/** What an action answers: a redirect (Post/Redirect/Get), a page rendered with something above its region, or no such action. */
export type ActionOutcome =
  | { readonly _tag: "Redirect"; readonly location: string; readonly headers?: Record<string, string> }
  | { readonly _tag: "Render"; readonly path: string; readonly extra: Html; readonly notice?: string }
  | { readonly _tag: "NoSuchAction" }
  | { readonly _tag: "BadRequest"; readonly message: string }

const redirectTo = (location: string, headers?: Record<string, string>): ActionOutcome => ({ _tag: "Redirect", location, ...(headers ? { headers } : {}) })
const done = (path: string, outcome: Either.Either<string, { readonly message: string } | string>) =>
  Either.isLeft(outcome)
    ? redirectTo(back(path, "error", typeof outcome.left === "string" ? outcome.left : outcome.left.message))
    : redirectTo(back(path, "notice", outcome.right))

const decodeProfile = Schema.decodeUnknownOption(Profile)

/** An id in an action's path, decoded — or the 400 of one that is not valid percent-encoding. */
const withId = (segment: string, then: (id: string) => Effect.Effect<ActionOutcome>): Effect.Effect<ActionOutcome> => {
  const id = percentDecoded(segment)
  return id === undefined
    ? Effect.succeed({ _tag: "BadRequest", message: `${segment.slice(0, 80)} is not valid percent-encoding` } as const)
    : then(id)
}

/**
 * Every owner action: a decoded form in, one service call (or a tool call through the Dispatcher, as the
 * portal's connection), an outcome out. The HTTP side (origin, session, CSRF token) was checked by Routes.
 */
export const makeActions = Effect.gen(function*() {
  const dispatcher = yield* Dispatcher
  const portal = yield* Portal
  const auth = yield* Auth
  const approvals = yield* Approvals
  const ledger = yield* Ledger
  const leases = yield* Leases
  const notifications = yield* Notifications
  // the daemon's store and bin, for the stdio entry (`ServeLive` provides them)
  const daemon = yield* Effect.serviceOption(PortalDaemon)

  /** A tool call as the portal's connection: done, or the refusal's message. */
  const asPortal = (caller: Caller, name: string, args: Record<string, unknown>): Effect.Effect<void, string> =>
    Effect.flatMap(dispatcher.call(caller, name, args), (o) => o.ok ? Effect.void : Effect.fail(o.body.error.message))

  const createConnection = (form: URLSearchParams, mcpUrl: string) =>
    Effect.gen(function*() {
      const profile = decodeProfile(form.get("profile"))
      if (Option.isNone(profile)) return redirectTo(back("/portal", "error", `unknown profile ${form.get("profile") ?? ""}`))
      const minted = yield* Effect.either(auth.createConnection({
        name: form.get("name") ?? "",
        profile: profile.value,
        scope: (form.get("scope") ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0),
        // caught up unless the owner asks for the history (the checkbox)
        backlog: form.get("backlog") === "1",
        // the owner decides its writes unless it lets the connection's own client answer (the checkbox)
        allowElicitation: form.get("allow_elicitation") === "1"
      }))
      if (Either.isLeft(minted)) return redirectTo(back("/portal", "error", minted.left.message))
      // the bearer is shown once: rendered into this response, never into a URL
      const configs = newConnectionConfigs(daemon, mcpUrl, minted.right.bearer)
      const notice = `created ${minted.right.name}${form.get("allow_elicitation") === "1" ? " (its own client may approve its plain writes)" : ""}`
      return { _tag: "Render", path: "/portal", extra: Pages.mintedBody(minted.right, configs), notice } as const
    })

  const changeConnection = (id: string, verb: string, form: URLSearchParams) =>
    Effect.gen(function*() {
      const target = yield* auth.get(id)
      if (Option.isNone(target)) return redirectTo(back("/portal", "error", `no connection ${id}`))
      const user = target.value.user_name
      const outcome = verb === "revoke"
        ? yield* Effect.either(Effect.map(auth.revoke(id, user), (c) => `revoked ${c.name}`))
        : yield* Effect.either(Effect.map(auth.rename(id, form.get("name") ?? "", user), (c) => `renamed to ${c.name}`))
      return done("/portal", outcome)
    })

  const decide = (id: string, verb: string) =>
    Effect.map(
      Effect.either(approvals.decide(id, verb === "approve" ? "approved" : "denied", "portal")),
      (outcome) => done("/portal/approvals", Either.map(outcome, (a) => `${a.status}: ${a.tool} by ${a.connection_name}`))
    )

  /** The Notifications page's actions: add a target, test or remove one, retry a dead letter (the session user's). */
  const notify = (path: string, session: PortalSession, form: URLSearchParams): Effect.Effect<ActionOutcome> | undefined => {
    const page = "/portal/notifications"
    const user = session.user_id
    let m: RegExpExecArray | null
    if (path === page) {
      const secret = form.get("secret") ?? ""
      const input = {
        url: form.get("url") ?? "",
        events: form.getAll("events"),
        format: form.get("format") ?? "json",
        ...(secret !== "" ? { secret } : {})
      }
      return Effect.map(Effect.either(notifications.addTarget(user, input)), (o) => done(page, Either.map(o, (t) => `added ${t.url}`)))
    }
    if ((m = /^\/portal\/notifications\/([0-9a-f-]{36})\/(test|remove)$/.exec(path))) {
      const id = m[1]
      return m[2] === "test"
        ? Effect.map(Effect.either(notifications.sendTest(user, id)), (o) => done(page, Either.map(o, (t) => `test notification ${t.notification_id} queued`)))
        : Effect.map(Effect.either(notifications.removeTarget(user, id)), (o) => done(page, Either.map(o, (t) => `removed ${t.url}`)))
    }
    if ((m = /^\/portal\/notifications\/dead\/([0-9a-f-]{36})\/retry$/.exec(path))) {
      return Effect.map(Effect.either(notifications.retry(user, m[1])), (o) => done(page, Either.map(o, (n) => `retrying ${n.event} ${n.id}`)))
    }
    return undefined
  }

  /** The action at `path` for this session (`mcpUrl`: the daemon's MCP endpoint, for a new connection's config). */
  const act = (path: string, session: PortalSession, form: URLSearchParams, mcpUrl: string): Effect.Effect<ActionOutcome> =>
    Effect.gen(function*() {
      let m: RegExpExecArray | null
      if (path === "/portal/logout") {
        yield* portal.logout(session.session_id)
        return redirectTo("/portal/login", { "set-cookie": clearSessionCookie })
      }
      if (path === "/portal/connections") return yield* createConnection(form, mcpUrl)
      if ((m = /^\/portal\/connections\/([0-9a-f-]{36})\/(rename|revoke)$/.exec(path))) return yield* changeConnection(m[1], m[2], form)
      if ((m = /^\/portal\/approvals\/([^/]+)\/(approve|deny)$/.exec(path))) {
        const verb = m[2]
        return yield* withId(m[1], (id) => decide(id, verb))
      }
      if ((m = /^\/portal\/leases\/([^/]+)\/release$/.exec(path))) {
        return yield* withId(m[1], (id) =>
          Effect.gen(function*() {
            const caller = yield* portal.callerFor(session.user_id)
            const outcome = yield* Effect.either(leases.releaseAsOwner(caller, id))
            return done("/portal", Either.map(outcome, (l) => `released ${l.resources.join(", ")} (held by ${l.agent_name})`))
          }))
      }
      if (path === "/portal/ledger/verify") {
        return { _tag: "Render", path: "/portal/ledger", extra: Pages.verifyResult(yield* ledger.verify()) } as const
      }
      if ((m = /^\/portal\/knowledge\/mutations\/([^/]+)\/revert$/.exec(path))) {
        return yield* withId(m[1], (id) =>
          Effect.gen(function*() {
            const caller = yield* portal.callerFor(session.user_id)
            const outcome = yield* Effect.either(asPortal(caller, "sophia.revert_mutation", { mutation_id: id }))
            return done("/portal/knowledge", Either.map(outcome, () => `reverted ${id}`))
          }))
      }
      return yield* (notify(path, session, form) ?? Effect.succeed({ _tag: "NoSuchAction" } as const))
    })

  return { act } as const
})
