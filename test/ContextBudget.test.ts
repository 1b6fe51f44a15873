import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { encode } from "gpt-tokenizer/encoding/o200k_base"
import { SophiaTest } from "../src/layers/App.js"
import { ToolRegistry } from "../src/mcp/Registry.js"

/**
 * Token counts are deterministic (unlike timings), so the budget of issue 6 is a test: every agent pays
 * for `tools/list` in its context, and a new tool or a wordier schema must not silently blow it.
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
})
