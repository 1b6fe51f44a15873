/**
 * Context economy: what the self-describing surface costs an agent in tokens (o200k_base, gpt-tokenizer,
 * offline). Rows: the full `tools/list` per profile (budget ≤ 8k tokens), the same surface before the
 * Registry's slimming, estimates of further trims, `capability_catalog` brief and full, `get_sdk_types`,
 * and one inbox page full vs `compact: true` (target ≤ 30% of full). Ratios are against the full variant
 * measured in the same run.
 */
import { countTokens } from "gpt-tokenizer"
import { Effect, Option } from "effect"
import { decideAccess } from "../src/domain/Access.js"
import type { Caller } from "../src/domain/Auth.js"
import { EnvelopeFields } from "../src/domain/Envelope.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { toJsonSchema } from "../src/mcp/JsonSchema.js"
import { effectiveInput, ToolRegistry } from "../src/mcp/Registry.js"
import { Auth } from "../src/services/Auth.js"

const TOOLS_LIST_BUDGET = 8_000
const COMPACT_TARGET = 0.3
const POSTS = 20

const tokens = (value: unknown) => countTokens(typeof value === "string" ? value : JSON.stringify(value))
const kb = (value: unknown) => ((typeof value === "string" ? value : JSON.stringify(value)).length / 1024).toFixed(1)

/** Drop keys anywhere in a JSON value (to estimate what a schema trim would save). */
const strip = (value: unknown, drop: (key: string, v: unknown) => boolean): unknown => {
  if (Array.isArray(value)) return value.map((v) => strip(v, drop))
  if (typeof value !== "object" || value === null) return value
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) if (!drop(k, v)) out[k] = strip(v, drop)
  return out
}

const program = Effect.gen(function*() {
  const registry = yield* ToolRegistry
  const dispatcher = yield* Dispatcher
  const auth = yield* Auth
  const callerOf = (name: string, profile: "observer" | "assistant" | "full") =>
    Effect.gen(function*() {
      const minted = yield* auth.createConnection({ name, profile })
      return yield* Effect.orDie(auth.authenticate(minted.bearer))
    })
  const call = (caller: Caller, name: string, args: unknown) =>
    Effect.map(dispatcher.call(caller, name, args), (o) => {
      if (!o.ok) throw new Error(`${name}: ${JSON.stringify(o.body)}`)
      return o.body
    })

  const rows: Array<[string, string, string, string, string]> = []
  const lists: Record<string, unknown> = {}
  for (const profile of ["observer", "assistant", "full"] as const) {
    const list = { tools: registry.listFor(profile, "underscore") }
    lists[profile] = list
    const t = tokens(list)
    rows.push([
      `tools/list — ${profile} (${list.tools.length} tools)`,
      String(t),
      kb(list),
      `${(t / TOOLS_LIST_BUDGET * 100).toFixed(0)}% of 8k budget`,
      t <= TOOLS_LIST_BUDGET ? "ok" : "OVER"
    ])
  }
  const full = lists.full as { tools: Array<Record<string, any>> }
  const fullTokens = tokens(full)
  // before the Registry's slimming: the raw JSONSchema.make output with the full envelope in every outputSchema
  const envelope = toJsonSchema(EnvelopeFields) as Record<string, any>
  const raw = {
    tools: registry.tools.filter((t) => decideAccess("full", t.access) !== "forbidden").map((t) => {
      const output = toJsonSchema(t.output) as Record<string, any>
      return {
        name: t.name.replace(".", "_"),
        description: t.description,
        inputSchema: toJsonSchema(effectiveInput(t)),
        outputSchema: {
          ...output,
          properties: { ...output.properties, ...envelope.properties },
          required: [...(output.required ?? []), ...(envelope.required ?? [])]
        },
        annotations: t.annotations
      }
    })
  }
  const rawTokens = tokens(raw)
  rows.push([
    "  ↳ before slimming (raw JSONSchema.make, full envelope)",
    String(rawTokens),
    kb(raw),
    `slimmed = ${(fullTokens / rawTokens * 100).toFixed(0)}% of raw`,
    rawTokens <= TOOLS_LIST_BUDGET ? "ok" : "OVER"
  ])
  const VALIDATION = new Set(["pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "minItems", "maxItems"])
  const trims: Array<[string, (tools: Array<Record<string, any>>) => unknown]> = [
    ["drop validation keywords from outputSchemas", (tools) =>
      tools.map((t) => ({ ...t, outputSchema: strip(t.outputSchema, (k, v) => VALIDATION.has(k) && typeof v !== "object") }))],
    ["drop `_blocking`/`_wait_resolved` from outputSchemas", (tools) =>
      tools.map((t) => ({ ...t, outputSchema: strip(t.outputSchema, (k) => k === "_blocking" || k === "_wait_resolved") }))],
    ["drop every outputSchema", (tools) => tools.map(({ outputSchema: _, ...t }) => t)]
  ]
  for (const [label, trim] of trims) {
    const trimmed = { tools: trim(full.tools) }
    const t = tokens(trimmed)
    rows.push([`  ↳ estimate: full tools/list, ${label}`, String(t), kb(trimmed), `${((1 - t / fullTokens) * 100).toFixed(0)}% saved`, "—"])
  }

  const heaviest = [...full.tools]
    .map((t) => ({ name: t.name as string, t: tokens(t), out: tokens(t.outputSchema) }))
    .sort((a, b) => b.t - a.t)
    .slice(0, 5)
  rows.push([
    "  ↳ heaviest tools (tokens, of which outputSchema)",
    heaviest.map((h) => `${h.t}`).join(" / "),
    "—",
    heaviest.map((h) => `${h.name} ${h.t} (${h.out})`).join(", "),
    "—"
  ])

  const lead = yield* callerOf("bench-lead", "full")
  const catalogFull = yield* call(lead, "sophia.capability_catalog", {})
  const catalogBrief = yield* call(lead, "sophia.capability_catalog", { brief: true })
  const sdk = yield* call(lead, "sophia.get_sdk_types", {})
  const catalogFullTokens = tokens(catalogFull)
  rows.push(["capability_catalog (full schemas)", String(catalogFullTokens), kb(catalogFull), "100%", "—"])
  rows.push([
    "capability_catalog({brief:true})",
    String(tokens(catalogBrief)),
    kb(catalogBrief),
    `${(tokens(catalogBrief) / catalogFullTokens * 100).toFixed(0)}% of full catalog`,
    "—"
  ])
  rows.push(["get_sdk_types declarations", String(tokens(sdk.declarations)), kb(sdk.declarations), "—", "—"])

  const hasInbox = Option.isSome(registry.lookup("sophia.coordination_inbox")) &&
    Option.isSome(registry.lookup("sophia.coordination_post"))
  if (hasInbox) {
    const writer = yield* callerOf("bench-writer", "full")
    const reader = yield* callerOf("bench-reader", "full")
    const kinds = ["status", "question", "claim", "answer", "decision"] as const
    for (let i = 0; i < POSTS; i++) {
      yield* call(writer, "sophia.coordination_post", {
        channel: i % 3 === 0 ? "arc:context-bench" : "general",
        kind: kinds[i % kinds.length],
        body: `Update ${i}: finished step ${i} of the migration; tests green on sqlite, postgres pending. ` +
          `Next: wire the sweep fiber and re-run the bench.`,
        references: [`https://example.test/pr/${100 + i}`],
        ...(i % 4 === 0 ? { payload: { step: i, ok: true } } : {}),
        ...(i % 5 === 0 ? { to: "bench-reader" } : {})
      })
    }
    const pageFull = yield* call(reader, "sophia.coordination_inbox", { limit: POSTS, peek: true })
    const pageCompact = yield* call(reader, "sophia.coordination_inbox", { limit: POSTS, peek: true, compact: true })
    const f = tokens(pageFull)
    const c = tokens(pageCompact)
    rows.push([`inbox page, ${POSTS} posts, full`, String(f), kb(pageFull), "100%", "—"])
    rows.push([
      `inbox page, ${POSTS} posts, compact`,
      String(c),
      kb(pageCompact),
      `${(c / f * 100).toFixed(0)}% of full (target ≤ 30%)`,
      c / f <= COMPACT_TARGET ? "ok" : "OVER"
    ])
    const postsOnly = [tokens((pageFull as any).posts), tokens((pageCompact as any).posts)]
    rows.push([
      "  ↳ rows only (posts[]), compact vs full",
      `${postsOnly[1]} / ${postsOnly[0]}`,
      "—",
      `${(postsOnly[1] / postsOnly[0] * 100).toFixed(0)}%`,
      "—"
    ])
    const cut = {
      ...pageCompact,
      posts: ((pageCompact as any).posts as Array<Record<string, unknown>>).map((p) =>
        typeof p.body === "string" && p.body.length > 80 ? { ...p, body: p.body.slice(0, 80) + "…" } : p
      )
    }
    rows.push([
      "  ↳ estimate: compact with body cut to 80 chars",
      String(tokens(cut)),
      kb(cut),
      `${(tokens(cut) / f * 100).toFixed(0)}% of full`,
      tokens(cut) / f <= COMPACT_TARGET ? "ok" : "OVER"
    ])
    const noId = {
      ...pageCompact,
      posts: ((pageCompact as any).posts as Array<Record<string, unknown>>).map(({ post_id: _, ...p }) => p)
    }
    rows.push([
      "  ↳ estimate: compact without post_id (channel + channel_seq identify a post)",
      String(tokens(noId)),
      kb(noId),
      `${(tokens(noId) / f * 100).toFixed(0)}% of full`,
      tokens(noId) / f <= COMPACT_TARGET ? "ok" : "OVER"
    ])
    const both = { ...pageCompact, posts: (cut.posts as Array<Record<string, unknown>>).map(({ post_id: _, ...p }) => p) }
    rows.push([
      "  ↳ estimate: both (no post_id, body cut to 80 chars)",
      String(tokens(both)),
      kb(both),
      `${(tokens(both) / f * 100).toFixed(0)}% of full`,
      tokens(both) / f <= COMPACT_TARGET ? "ok" : "OVER"
    ])
  } else {
    rows.push(["inbox page full vs compact", "n/a (coordination not landed)", "—", "—", "—"])
  }

  console.log(`## Context economy (o200k_base tokens, ${registry.tools.length} tools registered)\n`)
  console.log("| measure | tokens | KiB | vs baseline | verdict |")
  console.log("|---|---:|---:|---|---|")
  for (const r of rows) console.log(`| ${r.join(" | ")} |`)
  console.log("")
})

Effect.runPromise(program.pipe(Effect.provide(SophiaTest))).catch((error) => {
  console.error(error)
  process.exit(1)
})
