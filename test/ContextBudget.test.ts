import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { encode } from "gpt-tokenizer/encoding/o200k_base"
import { SophiaTest } from "../src/layers/App.js"
import { INSTRUCTIONS } from "../src/mcp/McpServer.js"
import { sharedArguments, ToolRegistry } from "../src/mcp/Registry.js"

/**
 * Token counts are deterministic (unlike timings), so the budget of issue 6 is a test: every agent pays
 * for `tools/list` in its context, and a new tool or a wordier schema must not silently blow it.
 * What tools/list carries and what only the catalog carries: docs/architecture.md, "What tools/list carries".
 */
describe("context budget", () => {
  it.effect("the full surface's tools/list stays within 8k tokens for every profile", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      for (const profile of ["observer", "assistant", "full", "portal"] as const) {
        const tokens = encode(JSON.stringify({ tools: registry.listFor(profile, "underscore") })).length
        assert.isAtMost(tokens, 8000, `${profile}: ${tokens} tokens`)
      }
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("tools/list carries every input key, type, enum, requirement and limit; only shared arguments' words are said once instead", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      const listed = registry.listFor("portal", "dotted")
      let shared = 0
      for (const entry of listed) {
        const tool = registry.tools.find((t) => t.name === entry.name)!
        const full = registry.inputJsonSchema(tool) as { properties?: Record<string, Record<string, unknown>> }
        const advertised = entry.inputSchema as { properties?: Record<string, Record<string, unknown>> }
        const names = sharedArguments(tool)
        // the full form (capability_catalog's schemas, get_sdk_types) keeps every description
        const expected = structuredClone(full)
        for (const k of names) {
          if (expected.properties?.[k] === undefined) continue
          assert.isString(expected.properties[k].description, `${entry.name}.${k}: described in the catalog`)
          delete expected.properties[k].description
          shared++
        }
        assert.deepStrictEqual(advertised, expected, `${entry.name}: tools/list input = the catalog's, less shared words`)
      }
      assert.isAbove(shared, 0)
      // what those arguments mean is said once, in the server's instructions
      for (const word of ["compact", "fields", "approval_id"]) assert.include(INSTRUCTIONS, word)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("tools/list output schemas name top-level keys with types and the envelope; no key's words, no row's keys", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      for (const entry of registry.listFor("portal", "dotted")) {
        const props = entry.outputSchema.properties as Record<string, Record<string, unknown>>
        for (const k of ["_inbox_unread", "_blocking", "_wait_resolved"]) assert.property(props, k, `${entry.name}: envelope ${k}`)
        for (const [k, v] of Object.entries(props)) {
          assert.isUndefined(v.description, `${entry.name}.${k}: no description in tools/list`)
          assert.notProperty(v, "properties", `${entry.name}.${k}: nested keys are the catalog's`)
          const items = v.items as Record<string, unknown> | undefined
          if (items !== undefined) assert.notStrictEqual(items.type, "object", `${entry.name}.${k}: a list of objects is named by its type`)
        }
      }
    }).pipe(Effect.provide(SophiaTest)))
})
