import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, TestClock } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import * as Http from "../src/mcp/Http.js"
import { layout, waitGraphSvg } from "../src/mcp/portal/Graph.js"
import { newConnectionConfigs, PortalDaemon } from "../src/mcp/portal/Daemon.js"
import { mintedBody } from "../src/mcp/portal/Pages.js"
import { plural, predicateInWords, uuidsIn } from "../src/mcp/portal/Words.js"
import { PortalRoutesLive } from "../src/mcp/portal/Routes.js"
import { Approvals } from "../src/services/Approvals.js"
import { Auth } from "../src/services/Auth.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Portal } from "../src/services/Portal.js"
import { makeFleet } from "../src/services/readmodel/Fleet.js"
import { execFile } from "node:child_process"
import * as path from "node:path"
import { SOPHIA, tempDb } from "./support/Cli.js"
import { appOnFile, connect } from "./support/Fixtures.js"

describe("Portal service", () => {
  it.effect("a login link opens one session, once; the session's caller is the owner's portal connection", () =>
    Effect.gen(function*() {
      const portal = yield* Portal
      const login = yield* portal.mintLogin()
      const opened = yield* portal.redeem(login.token)
      const again = yield* Effect.flip(portal.redeem(login.token))
      assert.strictEqual(again._tag, "PortalLoginRefused")
      assert.strictEqual(again.reason, "used")
      assert.strictEqual((yield* Effect.flip(portal.redeem("spl_nope"))).reason, "unknown")
      const session = Option.getOrThrow(yield* portal.session(opened.session_token))
      assert.isTrue(portal.csrfMatches(session, opened.csrf))
      assert.isFalse(portal.csrfMatches(session, opened.csrf.slice(1) + "x"))
      assert.isFalse(portal.csrfMatches(session, undefined))
      const caller = yield* portal.callerFor(session.user_id)
      assert.strictEqual(caller.profile, "portal")
      // a real row, owned by the owner, and the same one every time
      const info = Option.getOrThrow(yield* (yield* Auth).get(caller.connectionId))
      assert.strictEqual(info.user_name, "owner")
      assert.strictEqual(info.name, "portal")
      assert.strictEqual((yield* portal.callerFor(session.user_id)).connectionId, caller.connectionId)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a login link expires after 10 minutes; a session after 12 hours; logoutAll ends every session", () =>
    Effect.gen(function*() {
      const portal = yield* Portal
      const stale = yield* portal.mintLogin()
      yield* TestClock.adjust("10 minutes")
      assert.strictEqual((yield* Effect.flip(portal.redeem(stale.token))).reason, "expired")
      const fresh = yield* portal.redeem((yield* portal.mintLogin()).token)
      yield* TestClock.adjust("11 hours")
      assert.isTrue(Option.isSome(yield* portal.session(fresh.session_token)))
      yield* TestClock.adjust("1 hour")
      assert.isTrue(Option.isNone(yield* portal.session(fresh.session_token)))
      const a = yield* portal.redeem((yield* portal.mintLogin()).token)
      const b = yield* portal.redeem((yield* portal.mintLogin()).token)
      assert.strictEqual(yield* portal.logoutAll(), 2)
      assert.isTrue(Option.isNone(yield* portal.session(a.session_token)))
      assert.isTrue(Option.isNone(yield* portal.session(b.session_token)))
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("the portal's caller has no elevated gate, and what it writes is journaled as the portal connection", () =>
    Effect.gen(function*() {
      const portal = yield* Portal
      const caller = yield* portal.callerFor()
      const out = yield* (yield* Dispatcher).call(caller, "sophia.remember_fact", { subject: "s", predicate: "p", object: "o" })
      assert.isTrue(out.ok, JSON.stringify(out.body))
      assert.deepStrictEqual(yield* (yield* Approvals).list({ all: true }), [])
    }).pipe(Effect.provide(SophiaTest)))
})

describe("the Fleet read model", () => {
  const call = (caller: Caller, tool: string, args: unknown) =>
    Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(Effect.map((o) => o.body as any))

  it.effect("every connection with its unread count, open waits and claimed work, and the portal's own marked", () =>
    Effect.gen(function*() {
      const portal = yield* Portal
      const portalCaller = yield* portal.callerFor()
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const { caller: gone } = yield* connect("gone")
      const { caller: other } = yield* connect("stranger", "full", "someone-else")
      yield* call(a, "sophia.coordination_post", { channel: "general", kind: "status", body: "one" })
      yield* call(a, "sophia.coordination_post", { channel: "general", kind: "status", body: "two" })
      yield* call(b, "sophia.coordination_inbox", {})
      yield* call(b, "sophia.declare_wait", { on: "a", predicate: { type: "seq_reached", channel: "general", seq: 9 }, reason: "r" })
      yield* call(a, "sophia.ledger_append", { work_id: "w1", expected_head: null, events: [{ type: "opened", title: "first" }, { type: "claimed" }] })
      yield* call(gone, "sophia.ledger_append", { work_id: "w2", expected_head: null, events: [{ type: "opened", title: "second" }, { type: "claimed" }] })
      yield* (yield* Auth).revoke(gone.connectionId)
      const { fleet } = yield* makeFleet
      const view = yield* fleet()
      const by = new Map(view.connections.map((c) => [c.connection.name, c]))
      assert.deepStrictEqual([...by.keys()].sort(), ["a", "b", "gone", "portal", "stranger"])
      // a's posts: unread for everyone of a's user but a (b read them, and its wait's own post is unread for a)
      assert.strictEqual(by.get("a")!.unread, 1)
      assert.strictEqual(by.get("b")!.unread, 0)
      assert.strictEqual(by.get("portal")!.unread, 3)
      assert.strictEqual(by.get("stranger")!.unread, 0)
      assert.deepStrictEqual(view.connections.map((c) => [c.connection.name, c.open_waits]).filter(([, n]) => n !== 0), [["b", 1]])
      assert.deepStrictEqual(by.get("a")!.claimed.map((w) => [w.work_id, w.title]), [["w1", "first"]])
      assert.deepStrictEqual(by.get("gone")!, { connection: by.get("gone")!.connection, unread: 0, open_waits: 0, claimed: [], leases: [], is_portal: false })
      assert.isString(by.get("gone")!.connection.revoked_at)
      assert.deepStrictEqual(view.connections.filter((c) => c.is_portal).map((c) => c.connection.connection_id), [portalCaller.connectionId])
      assert.strictEqual(by.get("stranger")!.connection.user_id, other.userId)
    }).pipe(Effect.provide(SophiaTest)))
})

describe("the wait graph drawing", () => {
  const ref = (id: string) => ({ connection_id: id, agent_name: `agent-${id}` })
  it("layers waiters left of what they wait on, and marks cycles and orphans", () => {
    const edges = [
      { wait_id: "w1", waiter: ref("a"), on: ref("b"), reason: "r" },
      { wait_id: "w2", waiter: ref("b"), on: ref("c"), reason: "r" },
      { wait_id: "w3", waiter: ref("x"), on: ref("y"), reason: "r" },
      { wait_id: "w4", waiter: ref("y"), on: ref("x"), reason: "r" }
    ]
    const laid = layout({ edges, cycles: [["x", "y"]], orphanedWaits: new Map([["w2", "revoked"]]) })
    const at = new Map(laid.nodes.map((n) => [n.id, n]))
    assert.isTrue(at.get("a")!.layer < at.get("b")!.layer && at.get("b")!.layer < at.get("c")!.layer)
    assert.isTrue(at.get("c")!.orphan)
    const svg = waitGraphSvg({ edges, cycles: [["x", "y"]], orphanedWaits: new Map([["w2", "revoked"]]) })
    for (const name of ["agent-a", "agent-b", "agent-c", "agent-x", "agent-y"]) assert.include(svg, `>${name}</text>`)
    assert.strictEqual(svg.match(/class="edge edge-cycle"/g)?.length, 2)
    assert.strictEqual(svg.match(/edge-orphan/g)?.length, 1)
  })
  it("30 agents in a chain stay on distinct boxes", () => {
    const edges = Array.from({ length: 29 }, (_, i) => ({ wait_id: `w${i}`, waiter: ref(`n${i}`), on: ref(`n${i + 1}`), reason: "" }))
    const laid = layout({ edges, cycles: [], orphanedWaits: new Map() })
    assert.strictEqual(laid.nodes.length, 30)
    assert.strictEqual(new Set(laid.nodes.map((n) => `${n.x},${n.y}`)).size, 30)
  })
})

/** The daemon the portal says it runs in (ServeLive provides the real one): a SQLite file, this package's bin. */
const DAEMON_DB = "/srv/sophia/graph.db"

const ServeWithPortal = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
  Layer.provideMerge(PortalRoutesLive.pipe(Layer.provide(PortalDaemon.layer({ filename: DAEMON_DB }, SOPHIA)))),
  Layer.provideMerge(SophiaTest)
)

/** The portal's live stream (`/portal/events`) opened with a session cookie: `read` until a pattern shows up. */
const liveStream = (base: string, cookie: string) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const r = await fetch(`${base}/portal/events`, { headers: { cookie: `sophia_portal=${cookie}` }, signal: controller.signal })
    const reader = r.body!.getReader()
    let text = ""
    const decoder = new TextDecoder()
    return {
      controller,
      read: async (until: RegExp) => {
        while (!until.test(text)) text += decoder.decode((await reader.read()).value)
        return text
      }
    }
  })

/** A page's text as a reader sees it (the entities the templates escape, unescaped). */
const unescaped = (s: string) =>
  s.replace(/&quot;/g, "\"").replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&")

describe("the portal's words", () => {
  const ref = (id: string, name: string) => ({ connection_id: id, connection_short: id.slice(0, 8), agent_name: name })
  const reviewer = "1a2b3c4d-0000-4000-8000-000000000001"
  const builder = "5e6f7a8b-0000-4000-8000-000000000002"
  const edge = (predicate: Record<string, unknown>) =>
    ({ wait_id: "wait-x", waiter: ref(builder, "builder"), on: ref(reviewer, "reviewer"), predicate, reason: "r", expires_at: "2026-01-01T00:00:00.000Z" })
  const words = (predicate: Record<string, unknown>, names = new Map<string, string>()) =>
    predicateInWords(edge(predicate), names).text.replace(/<[^>]+>/g, "")

  it("counts take their noun's plural but for one", () => {
    assert.deepStrictEqual([0, 1, 2].map((n) => plural(n, "post")), ["0 posts", "1 post", "2 posts"])
    assert.strictEqual(plural(1, "work item"), "1 work item")
  })
  it("each predicate kind in words; the awaited author by default; a kind not known here said by its fields, ids shortened", () => {
    assert.strictEqual(words({ type: "post_exists", channel: "arc:build-42", from: reviewer, after_seq: 0 }), "a post in arc:build-42 from reviewer 1a2b3c4d")
    assert.strictEqual(words({ type: "post_exists", channel: "c", kind: "closeout" }), "a closeout post in c from reviewer 1a2b3c4d")
    assert.strictEqual(
      words({ type: "post_exists", channel: "c", from: builder, after_seq: 7 }, new Map([[builder, "builder"]])),
      "a post in c from builder 5e6f7a8b after #7"
    )
    assert.strictEqual(words({ type: "seq_reached", channel: "arc:build-42", seq: 40 }), "arc:build-42 reaches #40")
    assert.strictEqual(words({ type: "lease_free", resource: "path:src/**", project: "web" }), "path:src/** is free (project web)")
    const unknown = words({ type: "approval_decided", approval: "9c8d7e6f-0000-4000-8000-000000000003", by: reviewer })
    assert.strictEqual(unknown, "approval_decided: approval 9c8d7e6f, by reviewer 1a2b3c4d")
    assert.deepStrictEqual(uuidsIn({ a: [reviewer, { b: `x ${builder}` }], n: 1 }), [reviewer, builder])
  })
})

describe("a new connection's client entries", () => {
  const minted = { connection_id: "c", name: "newbie", profile: "full", bearer: "sph_test" }
  const mcpUrl = "http://127.0.0.1:7400/mcp"
  const entries = (store: { filename: string } | { url: string }) =>
    Effect.map(Effect.serviceOption(PortalDaemon), (daemon) => newConnectionConfigs(daemon, mcpUrl, minted.bearer)).pipe(
      Effect.provide(PortalDaemon.layer(store, "/opt/sophia/bin/sophia.js"))
    )

  it.effect("SQLite: the stdio entry runs this Node on the absolute bin with --db <the daemon's file, absolute>; never npx", () =>
    Effect.gen(function*() {
      const [http, stdio] = yield* entries({ filename: "relative/graph.db" })
      const file = path.resolve("relative/graph.db")
      assert.deepStrictEqual(http.json.mcpServers.sophia, { type: "http", url: mcpUrl, headers: { Authorization: "Bearer sph_test" } })
      assert.deepStrictEqual(stdio.json.mcpServers.sophia, {
        command: process.execPath,
        args: ["/opt/sophia/bin/sophia.js", "stdio", "--db", file],
        env: { SOPHIA_BEARER: "sph_test" }
      })
      const page = unescaped(mintedBody(minted, [http, stdio]).text)
      assert.include(page, `${process.execPath} /opt/sophia/bin/sophia.js stdio --db ${file}`)
      assert.include(page, `"--db",\n`)
      assert.include(page, "claude mcp add --transport http sophia http://127.0.0.1:7400/mcp")
      assert.notInclude(page, "npx")
    }))

  it.effect("Postgres: the stdio entry carries the URL in SOPHIA_DATABASE_URL, no --db", () =>
    Effect.gen(function*() {
      const url = "postgres://sophia:secret@db.internal:5432/graph"
      const [, stdio] = yield* entries({ url })
      assert.deepStrictEqual(stdio.json.mcpServers.sophia, {
        command: process.execPath,
        args: ["/opt/sophia/bin/sophia.js", "stdio"],
        env: { SOPHIA_BEARER: "sph_test", SOPHIA_DATABASE_URL: url }
      })
      const page = unescaped(mintedBody(minted, yield* entries({ url })).text)
      assert.include(page, `--env SOPHIA_DATABASE_URL=${url}`)
      assert.include(page, `"SOPHIA_DATABASE_URL": "${url}"`)
      assert.notInclude(page, "--db")
      assert.notInclude(page, "npx")
    }))

  it.effect("a database in the daemon's memory, or a server composed without PortalDaemon: the HTTP entry only", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual((yield* entries({ filename: ":memory:" })).map((c) => c.json.mcpServers.sophia.type), ["http"])
      assert.deepStrictEqual(newConnectionConfigs(Option.none(), mcpUrl, "sph_x").map((c) => c.json.mcpServers.sophia.type), ["http"])
    }))
})

describe("portal routes over HTTP", () => {
  const login = Effect.gen(function*() {
    const http = yield* Http.HttpServer
    const { token } = yield* (yield* Portal).mintLogin()
    const r = yield* Effect.promise(() => fetch(`${http.baseUrl}/portal/login?token=${token}`, { redirect: "manual" }))
    const cookie = /sophia_portal=([^;]+)/.exec(r.headers.get("set-cookie") ?? "")![1]
    return { r, cookie, base: http.baseUrl }
  })
  const get = (url: string, headers: Record<string, string> = {}) =>
    Effect.promise(async () => {
      const r = await fetch(url, { headers, redirect: "manual" })
      return { status: r.status, text: await r.text(), headers: r.headers }
    })

  it.live("login redirects to /portal with the cookie's flags; every page renders; no cookie → 401", () =>
    Effect.gen(function*() {
      const { base, cookie, r } = yield* login
      assert.strictEqual(r.status, 303)
      assert.strictEqual(r.headers.get("location"), "/portal")
      const flags = r.headers.get("set-cookie")!
      for (const f of ["HttpOnly", "SameSite=Strict", "Path=/portal", "Max-Age=43200"]) assert.include(flags, f)
      for (const [path, h1] of [["/portal", "Fleet"], ["/portal/approvals", "Approvals"], ["/portal/channels", "Channels"], ["/portal/waits", "Waits"], ["/portal/ledger", "Ledger"], ["/portal/knowledge", "Knowledge"]]) {
        const page = yield* get(`${base}${path}`, { cookie: `sophia_portal=${cookie}` })
        assert.strictEqual(page.status, 200, path)
        assert.include(page.text, `<h1>${h1}</h1>`)
        assert.include(page.headers.get("content-security-policy") ?? "", "script-src 'self'")
        const anonymous = yield* get(`${base}${path}`)
        assert.strictEqual(anonymous.status, 401, path)
      }
      const css = yield* get(`${base}/portal/assets/portal.css`)
      assert.strictEqual(css.status, 200)
      assert.include(css.headers.get("content-type") ?? "", "text/css")
    }).pipe(Effect.provide(ServeWithPortal)))

  it.live("a POST needs a same-origin Origin and the session's CSRF token (403 otherwise); with both it acts", () =>
    Effect.gen(function*() {
      const { base, cookie } = yield* login
      const { caller } = yield* connect("victim")
      const page = yield* get(`${base}/portal`, { cookie: `sophia_portal=${cookie}` })
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]
      const post = (headers: Record<string, string>, body: Record<string, string>) =>
        Effect.promise(async () =>
          (await fetch(`${base}/portal/connections/${caller.connectionId}/revoke`, {
            method: "POST",
            redirect: "manual",
            headers: { cookie: `sophia_portal=${cookie}`, "content-type": "application/x-www-form-urlencoded", ...headers },
            body: new URLSearchParams(body)
          })).status
        )
      assert.strictEqual(yield* post({ origin: base }, {}), 403)
      assert.strictEqual(yield* post({ origin: base }, { _csrf: "wrong" }), 403)
      assert.strictEqual(yield* post({}, { _csrf: csrf }), 403)
      assert.strictEqual(yield* post({ origin: "http://evil.example" }, { _csrf: csrf }), 403)
      assert.isNull(Option.getOrThrow(yield* (yield* Auth).get(caller.connectionId)).revoked_at)
      assert.strictEqual(yield* post({ origin: base }, { _csrf: csrf }), 303)
      assert.isString(Option.getOrThrow(yield* (yield* Auth).get(caller.connectionId)).revoked_at)
    }).pipe(Effect.provide(ServeWithPortal)))

  /** `Create connection` posted as the form does (the session's CSRF token, a same-origin Origin): the page, unescaped. */
  const create = (base: string, cookie: string, fields: Record<string, string>) =>
    Effect.gen(function*() {
      const page = yield* get(`${base}/portal`, { cookie: `sophia_portal=${cookie}` })
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]
      return yield* Effect.promise(async () => {
        const r = await fetch(`${base}/portal/connections`, {
          method: "POST",
          redirect: "manual",
          headers: { cookie: `sophia_portal=${cookie}`, "content-type": "application/x-www-form-urlencoded", origin: base },
          body: new URLSearchParams({ _csrf: csrf, profile: "assistant", scope: "", ...fields })
        })
        const text = unescaped(await r.text())
        return { status: r.status, text, bearer: /id="bearer" class="bearer">(sph_[^<]+)</.exec(text)?.[1] ?? "" }
      })
    })

  it.live("Create connection shows the bearer once with client entries for this daemon: absolute bin, --db, no npx", () =>
    Effect.gen(function*() {
      const { base, cookie } = yield* login
      const created = yield* create(base, cookie, { name: "newbie" })
      assert.strictEqual(created.status, 200)
      const bearer = created.bearer
      assert.match(bearer, /^sph_/)
      assert.include(created.text, `claude mcp add --transport http sophia ${base}/mcp --header "Authorization: Bearer ${bearer}"`)
      assert.include(created.text, `--env SOPHIA_BEARER=${bearer} -- ${process.execPath} ${SOPHIA} stdio --db ${DAEMON_DB}`)
      assert.include(created.text, `"args": [\n`)
      assert.include(created.text, `"${SOPHIA}"`)
      assert.isTrue(path.isAbsolute(SOPHIA))
      assert.notInclude(created.text, "npx")
      assert.notInclude(created.text, "same db")
    }).pipe(Effect.provide(ServeWithPortal)))

  it.live("Create connection starts caught up; with the backlog box ticked, with the history unread", () =>
    Effect.gen(function*() {
      const { base, cookie } = yield* login
      const { caller: poster } = yield* connect("poster")
      const dispatcher = yield* Dispatcher
      for (const body of ["one", "two"]) {
        assert.isTrue((yield* dispatcher.call(poster, "sophia.coordination_post", { channel: "general", kind: "status", body })).ok)
      }
      const form = yield* get(`${base}/portal`, { cookie: `sophia_portal=${cookie}` })
      assert.include(form.text, `<input type="checkbox" id="cc-backlog" name="backlog" value="1"><label for="cc-backlog">`)
      const unreadOf = (bearer: string) =>
        Effect.gen(function*() {
          const caller = yield* Effect.orDie((yield* Auth).authenticate(bearer))
          return ((yield* dispatcher.call(caller, "sophia.orient", {})).body as any)._inbox_unread as number
        })
      const caughtUp = yield* create(base, cookie, { name: "fresh" })
      const behind = yield* create(base, cookie, { name: "historian", backlog: "1" })
      assert.strictEqual(yield* unreadOf(caughtUp.bearer), 0)
      assert.strictEqual(yield* unreadOf(behind.bearer), 2)
    }).pipe(Effect.provide(ServeWithPortal)))

  it.live("Channels opens on the latest conversation, Knowledge lists documents unasked, Waits says predicates in words", () =>
    Effect.gen(function*() {
      const { base, cookie } = yield* login
      const { caller: builder } = yield* connect("builder")
      const { caller: reviewer } = yield* connect("reviewer")
      const dispatcher = yield* Dispatcher
      for (const [caller, tool, args] of [
        [reviewer, "sophia.coordination_post", { channel: "arc:build-42", kind: "status", body: "reviewing now" }],
        [builder, "sophia.declare_wait", { on: "reviewer", predicate: { type: "post_exists", channel: "arc:build-42", kind: "decision" }, reason: "the verdict" }],
        [builder, "sophia.add_document", { title: "Runbook", body: "how to build" }]
      ] as const) {
        const out = yield* dispatcher.call(caller, tool, args)
        assert.isTrue(out.ok, JSON.stringify(out.body))
      }
      const page = (p: string) => Effect.map(get(`${base}${p}`, { cookie: `sophia_portal=${cookie}` }), (r) => unescaped(r.text))
      const channels = yield* page("/portal/channels")
      assert.include(channels, "reviewing now")
      assert.match(channels, /arc:build-42<\/a> <span class="muted">1 post ·/)
      assert.notInclude(channels, "1 posts")
      const knowledge = yield* page("/portal/knowledge")
      assert.include(knowledge, "<strong>Runbook</strong>")
      assert.include(knowledge, "Documents (1), newest first")
      const waits = yield* page("/portal/waits")
      assert.include(waits, `a decision post in <code>arc:build-42</code> from <strong>reviewer</strong> <code>${reviewer.connectionId.slice(0, 8)}</code> after #1`)
      assert.notInclude(waits.replace(/<details>[\s\S]*?<\/details>/g, ""), reviewer.connectionId)
      assert.include(waits, `"from": "${reviewer.connectionId}"`)
    }).pipe(Effect.provide(ServeWithPortal)))

  it.live("a bearer opens nothing under /portal; the cookie opens no tool", () =>
    Effect.gen(function*() {
      const { base, cookie } = yield* login
      const { bearer } = yield* connect("agent")
      assert.strictEqual((yield* get(`${base}/portal`, { authorization: `Bearer ${bearer}` })).status, 401)
      assert.strictEqual((yield* get(`${base}/portal/events`, { authorization: `Bearer ${bearer}`, cookie: `sophia_portal=${cookie}` })).status, 401)
      const rest = yield* Effect.promise(() =>
        fetch(`${base}/api/tools/sophia.orient`, { method: "POST", headers: { cookie: `sophia_portal=${cookie}` }, body: "{}" })
      )
      assert.strictEqual(rest.status, 401)
    }).pipe(Effect.provide(ServeWithPortal)))

  it.live("the live stream sends a committed post as an SSE event", () =>
    Effect.gen(function*() {
      const { base, cookie } = yield* login
      const { caller } = yield* connect("poster")
      const received = yield* liveStream(base, cookie)
      yield* Effect.promise(() => received.read(/event: ready/))
      const out = yield* (yield* Dispatcher).call(caller, "sophia.coordination_post", { channel: "general", kind: "status", body: "hello" })
      assert.isTrue(out.ok)
      const text = yield* Effect.promise(() => received.read(/event: posts\ndata: [^\n]*"channel":"general"/))
      assert.include(text, `"author":"${caller.connectionId}"`)
      received.controller.abort()
    }).pipe(Effect.provide(ServeWithPortal)))

  it.live("a new approval reaches the live stream as an approvals event (ApprovalRequested), no polling", () =>
    Effect.gen(function*() {
      const { base, cookie } = yield* login
      const { caller } = yield* connect("scribe", "assistant")
      const received = yield* liveStream(base, cookie)
      yield* Effect.promise(() => received.read(/event: ready/))
      const out = yield* (yield* Dispatcher).call(caller, "sophia.add_document", { title: "t", body: "b" })
      assert.isFalse(out.ok)
      const id = (out.body.error as any).approval_id as string
      const text = yield* Effect.promise(() => received.read(/event: approvals\ndata: [^\n]*"_tag":"ApprovalRequested"/))
      assert.include(text, `"approval_id":"${id}"`)
      received.controller.abort()
    }).pipe(Effect.provide(ServeWithPortal)))

  it.live("an approval decided by another process on the same SQLite file (the CLI) reaches the live stream within seconds", () =>
    Effect.gen(function*() {
      const db = tempDb()
      const served = yield* Layer.build(Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
        Layer.provideMerge(PortalRoutesLive),
        Layer.provideMerge(appOnFile(db, 60_000))
      ))
      const run = <A, E>(effect: Effect.Effect<A, E, any>) => Effect.provide(effect, served) as Effect.Effect<A, E>
      const { base, cookie } = yield* run(login)
      const { caller } = yield* run(connect("scribe", "assistant"))
      const out = yield* run(Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.add_document", { title: "t", body: "b" })))
      const id = (out.body.error as any).approval_id as string
      const received = yield* liveStream(base, cookie)
      yield* Effect.promise(() => received.read(/event: ready/))
      // another OS process decides: it publishes nothing this daemon hears
      const cli = yield* Effect.promise(() => new Promise<number | null>((resolve) =>
        execFile(process.execPath, [SOPHIA, "approvals", "approve", id, "--db", db], (error) => resolve(error ? (error.code as number) ?? 1 : 0))))
      assert.strictEqual(cli, 0)
      const decided = yield* run(Effect.flatMap(Approvals, (a) => a.list({ all: true })))
      assert.strictEqual(decided.find((a) => a.approval_id === id)?.status, "approved")
      const text = yield* Effect.promise(() => received.read(/event: approvals\ndata: [^\n]*"_tag":"ApprovalsChanged"/)).pipe(
        Effect.timeout("20 seconds")
      )
      assert.include(text, "ApprovalsChanged")
      received.controller.abort()
    }).pipe(Effect.scoped), 60_000)
})
