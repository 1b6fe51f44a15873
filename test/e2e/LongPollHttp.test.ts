import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { HttpServer } from "../../src/mcp/Http.js"
import { Wakeups } from "../../src/services/Wakeups.js"
import { connect } from "../support/Fixtures.js"
import { mcpClient, ServeTest } from "../support/Serve.js"

const parkedCount = Effect.map(Wakeups, (w) => w.parkedCount())
const until = (n: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2_000 && (yield* parkedCount) !== n; i++) yield* Effect.sleep("10 millis")
    assert.strictEqual(yield* parkedCount, n)
  })

describe("long polls over HTTP end when the client goes away", () => {
  it.live("REST: a dropped request unparks its wait_s poll", () =>
    Effect.gen(function*() {
      const { port } = yield* HttpServer
      const { bearer } = yield* connect("rest-poller", "full", "rest-user")
      const controller = new AbortController()
      const request = fetch(`http://127.0.0.1:${port}/api/tools/sophia.coordination_inbox`, {
        method: "POST",
        headers: { Authorization: `Bearer ${bearer}`, "Content-Type": "application/json" },
        body: JSON.stringify({ wait_s: 60 }),
        signal: controller.signal
      }).catch(() => undefined)
      yield* until(1)
      controller.abort()
      yield* Effect.promise(() => request)
      yield* until(0)
    }).pipe(Effect.provide(ServeTest())))

  it.live("Streamable HTTP: a cancelled tools/call unparks its wait_s poll", () =>
    Effect.scoped(Effect.gen(function*() {
      const { mcpUrl } = yield* HttpServer
      const { bearer } = yield* connect("mcp-poller", "full", "mcp-user")
      const client = yield* mcpClient(mcpUrl, bearer)
      const controller = new AbortController()
      const pending = client.callTool({ name: "sophia_coordination_inbox", arguments: { wait_s: 60 } }, undefined, {
        signal: controller.signal,
        timeout: 120_000
      }).catch(() => undefined)
      yield* until(1)
      controller.abort()
      yield* Effect.promise(() => pending)
      yield* until(0)
    })).pipe(Effect.provide(ServeTest())))
})
