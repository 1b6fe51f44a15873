/**
 * Leases in the owner's portal over HTTP: the Fleet page lists every active lease with its holder and a
 * `Release` button, which ends the lease for the owner (the agent's next acquire of it is granted); a work
 * item's page lists the leases taken for it; the read model's fleet carries each connection's leases.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import * as Http from "../src/mcp/Http.js"
import { PortalDaemon } from "../src/mcp/portal/Daemon.js"
import { PortalRoutesLive } from "../src/mcp/portal/Routes.js"
import { Portal } from "../src/services/Portal.js"
import { ReadModel } from "../src/services/readmodel/ReadModel.js"
import { SOPHIA } from "./support/Cli.js"
import { connect } from "./support/Fixtures.js"

const ServeWithPortal = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
  Layer.provideMerge(PortalRoutesLive.pipe(Layer.provide(PortalDaemon.layer({ filename: "/srv/sophia/graph.db" }, SOPHIA)))),
  Layer.provideMerge(SophiaTest)
)

const unescaped = (s: string) =>
  s.replace(/&quot;/g, "\"").replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&")

describe("leases in the portal", () => {
  it.live("Fleet lists each lease with its holder and Release; Release ends it; the work item's page lists its leases", () =>
    Effect.gen(function*() {
      const http = yield* Http.HttpServer
      const base = http.baseUrl
      const { token } = yield* (yield* Portal).mintLogin()
      const login = yield* Effect.promise(() => fetch(`${base}/portal/login?token=${token}`, { redirect: "manual" }))
      const cookie = `sophia_portal=${/sophia_portal=([^;]+)/.exec(login.headers.get("set-cookie") ?? "")![1]}`
      const page = (path: string) => Effect.promise(async () => unescaped(await (await fetch(`${base}${path}`, { headers: { cookie } })).text()))

      const dispatcher = yield* Dispatcher
      const { caller: alice } = yield* connect("alice")
      const { caller: bob } = yield* connect("bob")
      const opened = yield* dispatcher.call(alice, "sophia.ledger_append", {
        work_id: "parser-7",
        expected_head: null,
        events: [{ type: "opened", title: "the parser" }, { type: "claimed" }]
      })
      assert.isTrue(opened.ok, JSON.stringify(opened.body))
      const held = yield* dispatcher.call(alice, "sophia.lease_acquire", {
        resources: ["path:src/parser/**", "slot:build"],
        reason: "rewriting the parser",
        work_id: "parser-7"
      })
      assert.isTrue(held.ok, JSON.stringify(held.body))
      const leaseId = held.body.lease_id as string

      const view = yield* (yield* ReadModel).fleet()
      const row = view.connections.find((c) => c.connection.name === "alice")!
      assert.deepStrictEqual(row.leases.map((l) => l.lease_id), [leaseId])
      assert.deepStrictEqual(view.connections.find((c) => c.connection.name === "bob")!.leases, [])

      const fleet = yield* page("/portal")
      assert.include(fleet, "Leases (1 active)")
      assert.include(fleet, "path:src/parser/**")
      assert.include(fleet, "rewriting the parser")
      assert.include(fleet, `action="/portal/leases/${leaseId}/release"`)
      assert.match(fleet, /<button type="submit">Release<\/button>/)

      const item = yield* page("/portal/ledger?work=parser-7")
      assert.include(item, "1 lease held for it")
      assert.include(item, "slot:build")

      const csrf = /name="_csrf" value="([^"]+)"/.exec(fleet)![1]
      const released = yield* Effect.promise(async () =>
        await fetch(`${base}/portal/leases/${leaseId}/release`, {
          method: "POST",
          redirect: "manual",
          headers: { cookie, "content-type": "application/x-www-form-urlencoded", origin: base },
          body: new URLSearchParams({ _csrf: csrf })
        })
      )
      assert.strictEqual(released.status, 303)
      assert.include(decodeURIComponent(released.headers.get("location") ?? ""), "released path:src/parser/**, slot:build (held by alice)")
      assert.include(yield* page("/portal"), "Leases (0 active)")
      const again = yield* dispatcher.call(bob, "sophia.lease_acquire", { resources: ["slot:build"], reason: "mine now" })
      assert.isTrue(again.ok, JSON.stringify(again.body))
      const twice = yield* Effect.promise(async () =>
        (await fetch(`${base}/portal/leases/${leaseId}/release`, {
          method: "POST",
          redirect: "manual",
          headers: { cookie, "content-type": "application/x-www-form-urlencoded", origin: base },
          body: new URLSearchParams({ _csrf: csrf })
        })).headers.get("location") ?? ""
      )
      assert.include(decodeURIComponent(twice), "released already")
    }).pipe(Effect.provide(ServeWithPortal)))
})
