/**
 * Malformed percent-encoding is the client's error, said as a 400 with a clear message — never a 500
 * `internal_error` — over HTTP against a served daemon: the portal's paths (every action's id), query
 * strings and form bodies, with or without a session; the REST path's tool name; a request target no URL
 * parser takes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as net from "node:net"
import { SophiaTest } from "../src/layers/App.js"
import * as Http from "../src/mcp/Http.js"
import { PortalRoutesLive } from "../src/mcp/portal/Routes.js"
import { Approvals } from "../src/services/Approvals.js"
import { Portal } from "../src/services/Portal.js"
import { connect } from "./support/Fixtures.js"

const Served = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
  Layer.provideMerge(PortalRoutesLive),
  Layer.provideMerge(SophiaTest)
)

const BAD = "%E0%A4%A"

const request = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const r = await fetch(url, { redirect: "manual", ...init })
    return { status: r.status, text: await r.text() }
  })

/** A raw HTTP/1.1 request line, for a target `fetch` would normalize: the status line of the answer. */
const rawStatus = (port: number, target: string) =>
  Effect.promise(() =>
    new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1", () => socket.end(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`))
      let text = ""
      socket.on("data", (c) => (text += c.toString("utf8")))
      socket.on("end", () => resolve(text.split("\r\n")[0]))
      socket.on("error", reject)
    })
  )

describe("bad percent-encoding → 400", () => {
  it.live("every portal action, page and form: 400 with a clear message, logged in or not; nothing decided", () =>
    Effect.gen(function*() {
      const http = yield* Http.HttpServer
      const base = http.baseUrl
      const { token } = yield* (yield* Portal).mintLogin()
      const login = yield* Effect.promise(() => fetch(`${base}/portal/login?token=${token}`, { redirect: "manual" }))
      const cookie = `sophia_portal=${/sophia_portal=([^;]+)/.exec(login.headers.get("set-cookie") ?? "")![1]}`
      const page = yield* request(`${base}/portal`, { headers: { cookie } })
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.text)![1]
      const form = { cookie, origin: base, "content-type": "application/x-www-form-urlencoded" }
      // a pending approval that must stay pending
      const { caller } = yield* connect("scribe", "assistant")
      const asked = yield* Effect.flatMap(Approvals, (a) => a.gate({
        caller,
        tool: { name: "sophia.add_document", access: "write" },
        decision: "approval",
        args: { title: "t", body: "b" },
        execute: Effect.succeed({})
      })).pipe(Effect.flip)
      const id = (asked as any).approval_id as string

      for (const path of [`/portal/approvals/${BAD}/approve`, `/portal/approvals/${BAD}/deny`, `/portal/knowledge/mutations/${BAD}/revert`]) {
        const acted = yield* request(`${base}${path}`, { method: "POST", headers: form, body: `_csrf=${csrf}` })
        assert.strictEqual(acted.status, 400, path)
        assert.include(acted.text, "not valid percent-encoding")
        // without a session, without an Origin: still the request's own error first
        assert.strictEqual((yield* request(`${base}${path}`, { method: "POST", body: "" })).status, 400, path)
      }
      for (const path of [`/portal/${BAD}`, `/portal/channels?channel=${BAD}`, `/portal/approvals?approval=${BAD}`, `/portal/ledger?work=x${BAD}`]) {
        const got = yield* request(`${base}${path}`, { headers: { cookie } })
        assert.strictEqual(got.status, 400, path)
        assert.include(got.text, "The address is not valid percent-encoding")
      }
      // a form body that is no percent-encoding: refused as such, before any action
      const body = yield* request(`${base}/portal/approvals/${id}/approve`, { method: "POST", headers: form, body: `_csrf=${csrf}&x=${BAD}` })
      assert.strictEqual(body.status, 400)
      assert.include(body.text, "The form is not valid percent-encoding")
      assert.strictEqual((yield* Effect.flatMap(Approvals, (a) => a.list())).find((a) => a.approval_id === id)?.status, "pending")
      // a well-formed id that names nothing is the action's own answer (a redirect with the error), not a 400
      const unknown = yield* request(`${base}/portal/approvals/apr-%C3%A9/approve`, { method: "POST", headers: form, body: `_csrf=${csrf}` })
      assert.strictEqual(unknown.status, 303)
    }).pipe(Effect.provide(Served)))

  it.live("outside the portal: the REST tool name (400 validation_error) and a request target no URL parser takes (400)", () =>
    Effect.gen(function*() {
      const http = yield* Http.HttpServer
      const { bearer } = yield* connect("agent", "full")
      const rest = yield* request(`${http.baseUrl}/api/tools/${BAD}`, {
        method: "POST",
        headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
        body: "{}"
      })
      assert.strictEqual(rest.status, 400)
      assert.strictEqual(JSON.parse(rest.text).error.code, "validation_error")
      assert.include(JSON.parse(rest.text).error.message, "not valid URI encoding")
      assert.match(yield* rawStatus(http.port, "//["), /^HTTP\/1\.1 400 /)
      assert.match(yield* rawStatus(http.port, `/portal/approvals/${BAD}/approve`), /^HTTP\/1\.1 400 /)
      // the daemon still serves
      assert.strictEqual((yield* request(`${http.baseUrl}/healthz`)).status, 200)
    }).pipe(Effect.provide(Served)))
})
