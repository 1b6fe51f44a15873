import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { SophiaTest } from "../src/layers/App.js"
import * as Http from "../src/mcp/Http.js"
import { PortalDaemon } from "../src/mcp/portal/Daemon.js"
import { PortalRoutesLive } from "../src/mcp/portal/Routes.js"
import { Coordination } from "../src/services/Coordination.js"
import { Portal } from "../src/services/Portal.js"
import { SOPHIA } from "./support/Cli.js"
import { connect } from "./support/Fixtures.js"

/** The owner's Channels page: each targeted post with its receipt (read by its target when and how, or not yet). */

const Served = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
  Layer.provideMerge(PortalRoutesLive.pipe(Layer.provide(PortalDaemon.layer({ filename: "/srv/sophia/graph.db" }, SOPHIA)))),
  Layer.provideMerge(SophiaTest)
)

const stop = JSON.parse(fs.readFileSync(path.join(__dirname, "fixtures", "hooks", "claude-code", "Stop.json"), "utf8"))

describe("portal: receipts of targeted posts", () => {
  it.live("a targeted post says 'not read yet', then when and how its target had it; an untargeted post says nothing", () =>
    Effect.gen(function*() {
      const http = yield* Http.HttpServer
      const { token } = yield* (yield* Portal).mintLogin()
      const login = yield* Effect.promise(() => fetch(`${http.baseUrl}/portal/login?token=${token}`, { redirect: "manual" }))
      const cookie = /sophia_portal=([^;]+)/.exec(login.headers.get("set-cookie") ?? "")![1]
      const page = Effect.promise(() =>
        fetch(`${http.baseUrl}/portal/channels?channel=arc%3Arelease`, { headers: { cookie: `sophia_portal=${cookie}` } }).then((r) => r.text())
      )
      const coordination = yield* Coordination
      const a = yield* connect("alice")
      const b = yield* connect("bob")
      yield* coordination.post(a.caller, { channel: "arc:release", kind: "status", body: "tagging soon" })
      yield* coordination.post(a.caller, { channel: "arc:release", kind: "question", body: "may I tag?", to: "bob" })

      const before = yield* page
      assert.include(before, "→ bob <span class=\"receipt muted\">· not read yet</span>")
      assert.strictEqual(before.split("class=\"receipt").length - 1, 1, "only the targeted post has a receipt")

      const hooked = yield* Effect.promise(() =>
        fetch(`${http.baseUrl}/hooks/claude-code`, {
          method: "POST",
          headers: { authorization: `Bearer ${b.bearer}`, "content-type": "application/json" },
          body: JSON.stringify(stop)
        }).then((r) => r.json() as Promise<{ decision?: string }>)
      )
      assert.strictEqual(hooked.decision, "block")
      const after = yield* page
      assert.match(after, /→ bob <span class="receipt">· read <time datetime="[^"]+">[^<]+<\/time> via hook<\/span>/)
    }).pipe(Effect.provide(Served)))
})
