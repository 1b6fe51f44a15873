import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Auth, Coordination, Ledger, SophiaTest, Waits } from "../src/index.js"

/** docs/architecture.md, "Layers": another Effect app provides the layers and calls the services directly, without MCP. */
describe("the embeddable library (src/index.ts)", () => {
  it.effect("provides SophiaTest and calls services directly", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const minted = yield* auth.createConnection({ name: "embedded", profile: "full" })
      const reader = yield* auth.createConnection({ name: "reader", profile: "observer" })
      const me = yield* auth.authenticate(minted.bearer)
      const other = yield* auth.authenticate(reader.bearer)
      const coordination = yield* Coordination
      const receipt = yield* coordination.post(me, { channel: "arc:lib", kind: "status", body: "from a library" })
      assert.strictEqual(receipt.channel_seq, 1)
      assert.strictEqual(yield* coordination.unreadCount(other), 1)
      const ledger = yield* Ledger
      const appended = yield* ledger.append(me, { work_id: "lib-1", expected_head: null, events: [{ type: "opened", title: "t" }] })
      assert.match(appended.head, /^[0-9a-f]{64}$/)
      const waits = yield* Waits
      const graph = yield* waits.graph(me)
      assert.deepStrictEqual(graph.edges, [])
    }).pipe(Effect.provide(SophiaTest)))
})
