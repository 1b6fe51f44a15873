import { it } from "@effect/vitest"
import { Effect } from "effect"
import { encode } from "gpt-tokenizer/encoding/o200k_base"
import { SophiaTest } from "../src/layers/App.js"
import { ToolRegistry } from "../src/mcp/Registry.js"
it.effect("tok", () => Effect.gen(function*() {
  const registry = yield* ToolRegistry
  const tools = registry.listFor("assistant", "underscore")
  const rows = tools.map((t: any) => [t.name, encode(JSON.stringify(t)).length, encode(JSON.stringify(t.inputSchema)).length, encode(JSON.stringify(t.outputSchema)).length, encode(t.description).length])
  rows.sort((a: any, b: any) => b[1] - a[1])
  console.log(JSON.stringify(tools.find((t: any) => t.name === "sophia_cancel_wait")), JSON.stringify(tools.find((t: any) => t.name === "sophia_coordination_inbox")));console.log(rows.map((r) => r.join(" ")).join("\n"))
  console.log("total", encode(JSON.stringify({ tools })).length)
}).pipe(Effect.provide(SophiaTest)))
