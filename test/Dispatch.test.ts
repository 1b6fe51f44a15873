import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Schema } from "effect"
import { ACCESS_CLASSES } from "../src/domain/Auth.js"
import type { AccessClass } from "../src/domain/Auth.js"
import { makeCore } from "../src/layers/App.js"
import { TestStore } from "../src/layers/Sql.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { APPEND_ONLY, defineTool, makeRegistry, READ_ONLY, ToolRegistry } from "../src/mcp/Registry.js"
import { connect } from "./support/Fixtures.js"

/** Throwaway tools, one per access class, each recording that its handler ran. */
const ran: Array<string> = []
const probe = (access: AccessClass) =>
  defineTool({
    name: `sophia.probe_${access}`,
    group: "test",
    access,
    description: `probe tool of class ${access}`,
    annotations: access === "read" ? READ_ONLY : APPEND_ONLY,
    input: Schema.Struct({ n: Schema.optional(Schema.Number) }),
    output: Schema.Struct({ ran: Schema.String, by: Schema.String }),
    handler: (_input, { caller }) => Effect.sync(() => (ran.push(access), { ran: access, by: caller.connectionId }))
  })

const TestRegistry = Layer.succeed(ToolRegistry, makeRegistry(ACCESS_CLASSES.map(probe)))
// gated calls (approvals) answer at once instead of waiting for the owner's decision
const ProbeApp = makeCore(TestStore, TestRegistry).pipe(
  Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_APPROVAL_WAIT_MS", "0"]]))))
)

const expected = {
  observer: { read: "ok", coordinate: "forbidden_profile", write: "forbidden_profile", elevated: "forbidden_profile" },
  assistant: { read: "ok", coordinate: "ok", write: "approval_required", elevated: "owner_approval_required" },
  full: { read: "ok", coordinate: "ok", write: "ok", elevated: "owner_approval_required" }
} as const

describe("Dispatcher", () => {
  it.effect("applies the access rules to every profile × access class, before the handler runs", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      for (const profile of ["observer", "assistant", "full"] as const) {
        const { caller } = yield* connect(`agent-${profile}`, profile)
        for (const access of ACCESS_CLASSES) {
          ran.length = 0
          const outcome = yield* dispatcher.call(caller, `sophia.probe_${access}`, {})
          const want = expected[profile][access]
          if (want === "ok") {
            assert.isTrue(outcome.ok, `${profile}/${access}`)
            assert.deepStrictEqual(ran, [access])
            assert.strictEqual(outcome.body.by, caller.connectionId)
          } else {
            assert.isFalse(outcome.ok, `${profile}/${access}`)
            if (!outcome.ok) assert.strictEqual(outcome.body.error.code, want, `${profile}/${access}`)
            assert.deepStrictEqual(ran, [], `${profile}/${access} must not run the handler`)
          }
          assert.strictEqual(outcome.body._inbox_unread, 0)
        }
      }
    }).pipe(Effect.provide(ProbeApp)))

  it.effect("accepts both spellings; refuses an unknown tool with suggestions and wrong types with validation_error", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("worker", "full")
      for (const name of ["sophia.probe_read", "sophia_probe_read"]) {
        const outcome = yield* dispatcher.call(caller, name, { n: 1 })
        assert.isTrue(outcome.ok, name)
      }
      const unknown = yield* dispatcher.call(caller, "sophia.probe_reed", {})
      assert.isFalse(unknown.ok)
      if (!unknown.ok) {
        assert.strictEqual(unknown.body.error.code, "not_found")
        assert.include(unknown.body.error.suggestions as Array<string>, "sophia.probe_read")
      }
      const wrong = yield* dispatcher.call(caller, "sophia.probe_read", { n: "one" })
      assert.isFalse(wrong.ok)
      if (!wrong.ok) {
        assert.strictEqual(wrong.body.error.code, "validation_error")
        assert.include(wrong.body.error.message, "n")
      }
      const notAnObject = yield* dispatcher.call(caller, "sophia.probe_read", [1, 2])
      assert.isFalse(notAnObject.ok)
      if (!notAnObject.ok) assert.strictEqual(notAnObject.body.error.code, "validation_error")
    }).pipe(Effect.provide(ProbeApp)))

  it.effect("an outer call carries the envelope; a composed inner call (as execute_code makes) does not", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("composer", "full")
      const outer = yield* dispatcher.call(caller, "sophia.probe_read", {})
      assert.isTrue(outer.ok)
      assert.strictEqual(outer.body._inbox_unread, 0)
      const inner = yield* dispatcher.call(caller, "sophia.probe_read", {}, { viaSandbox: true, envelope: false })
      assert.isTrue(inner.ok)
      assert.deepStrictEqual(Object.keys(inner.body).sort(), ["by", "ran"])
      const refused = yield* dispatcher.call(caller, "sophia.probe_nope", {}, { viaSandbox: true, envelope: false })
      assert.isFalse(refused.ok)
      assert.deepStrictEqual(Object.keys(refused.body), ["error"])
    }).pipe(Effect.provide(ProbeApp)))

  it.effect("advertises to each profile exactly the tools it may call", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      const names = (p: "observer" | "assistant" | "full") => registry.listFor(p, "dotted").map((t) => t.name)
      assert.deepStrictEqual(names("observer"), ["sophia.probe_read"])
      assert.deepStrictEqual(names("full"), ACCESS_CLASSES.map((a) => `sophia.probe_${a}`))
      assert.deepStrictEqual(
        registry.listFor("full", "underscore").map((t) => t.name),
        ACCESS_CLASSES.map((a) => `sophia_probe_${a}`)
      )
    }).pipe(Effect.provide(ProbeApp)))
})
