import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { makeCore, SophiaTest } from "../src/layers/App.js"
import { TestStore } from "../src/layers/Sql.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import type { Registry } from "../src/mcp/Registry.js"
import { defineTool, makeRegistry, READ_ONLY, ToolRegistry } from "../src/mcp/Registry.js"
import { connect } from "./support/Fixtures.js"

/** A throwaway list tool declaring the shared projection; it counts how often its handler ran. */
const Row = Schema.Struct({
  id: Schema.String,
  title: Schema.String,
  body: Schema.String,
  score: Schema.Number,
  tags: Schema.Array(Schema.String),
  meta: Schema.Struct({ origin: Schema.String })
})
const COMPACT = ["id", "title"] as const
let handlerRuns = 0
const rows = Array.from({ length: 5 }, (_, i) => ({
  id: `r${i}`,
  title: `title ${i}`,
  body: `a long body ${i} `.repeat(20),
  score: i / 2,
  tags: ["x", `t${i}`],
  meta: { origin: "test" }
}))
const listTool = defineTool({
  name: "sophia.test_rows",
  group: "test",
  access: "read",
  description: "rows for the projection test",
  annotations: READ_ONLY,
  input: Schema.Struct({ limit: Schema.optional(Schema.Number) }),
  output: Schema.Struct({ rows: Schema.Array(Row), total: Schema.Number }),
  projection: { key: "rows", row: Row, compact: COMPACT },
  handler: (input) =>
    Effect.sync(() => {
      handlerRuns++
      return { rows: rows.slice(0, input.limit ?? rows.length), total: rows.length }
    })
})

/** The same rows with a compact preview of `body` (a skim view); `fields` still returns whole values. */
const previewTool = defineTool({
  ...listTool,
  name: "sophia.test_previews",
  projection: { key: "rows", row: Row, compact: ["id", "body"], compactPreview: { body: 20 } }
})

const ProjectionApp = makeCore(
  TestStore,
  ToolRegistry.fromToolSets(Effect.succeed([listTool, previewTool]))
)
const ALL_KEYS = Object.keys(Row.fields)

describe("list projections (compact / fields), one shared mechanism", () => {
  it.effect("compact cuts declared text keys to a preview; fields returns them whole", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("skimmer", "observer")
      const compact = yield* dispatcher.call(caller, "sophia.test_previews", { compact: true })
      assert.isTrue(compact.ok)
      const compactRows = compact.body.rows as Array<Record<string, unknown>>
      compactRows.forEach((row, i) => {
        assert.strictEqual(row.body, rows[i].body.slice(0, 19) + "…")
        assert.strictEqual((row.body as string).length, 20)
      })
      const exact = yield* dispatcher.call(caller, "sophia.test_previews", { fields: ["id", "body"] })
      assert.isTrue(exact.ok)
      ;(exact.body.rows as Array<Record<string, unknown>>).forEach((row, i) => assert.strictEqual(row.body, rows[i].body))
    }).pipe(Effect.provide(ProjectionApp)))

  it.effect("returns whole rows by default, the curated keys with compact, exactly the asked keys with fields", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("reader", "observer")

      const full = yield* dispatcher.call(caller, "sophia.test_rows", {})
      assert.isTrue(full.ok)
      const fullRows = full.body.rows as Array<Record<string, unknown>>
      assert.strictEqual(fullRows.length, rows.length)
      for (const row of fullRows) assert.sameMembers(Object.keys(row), ALL_KEYS)

      const compact = yield* dispatcher.call(caller, "sophia_test_rows", { compact: true, limit: 3 })
      assert.isTrue(compact.ok)
      const compactRows = compact.body.rows as Array<Record<string, unknown>>
      assert.strictEqual(compactRows.length, 3)
      compactRows.forEach((row, i) => {
        assert.sameMembers(Object.keys(row), [...COMPACT])
        assert.strictEqual(row.id, rows[i].id)
        assert.strictEqual(row.title, rows[i].title)
      })
      // the rest of the result and the envelope are untouched
      assert.strictEqual(compact.body.total, rows.length)
      assert.strictEqual(compact.body._inbox_unread, 0)
      assert.isBelow(JSON.stringify(compact.body.rows).length, JSON.stringify(fullRows.slice(0, 3)).length * 0.3)

      const fields = yield* dispatcher.call(caller, "sophia.test_rows", { fields: ["score", "id", "meta"] })
      assert.isTrue(fields.ok)
      for (const row of fields.body.rows as Array<Record<string, unknown>>) {
        assert.sameMembers(Object.keys(row), ["score", "id", "meta"])
      }
      // fields wins over compact when both are given: exact keys were asked for
      const both = yield* dispatcher.call(caller, "sophia.test_rows", { compact: true, fields: ["body"] })
      assert.isTrue(both.ok)
      for (const row of both.body.rows as Array<Record<string, unknown>>) assert.deepStrictEqual(Object.keys(row), ["body"])
    }).pipe(Effect.provide(ProjectionApp)))

  it.effect("refuses unknown fields with unknown_fields and the valid keys, before the handler runs", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("reader", "full")
      const before = handlerRuns
      const outcome = yield* dispatcher.call(caller, "sophia.test_rows", { fields: ["id", "titel", "nope"] })
      assert.isFalse(outcome.ok)
      if (outcome.ok) return
      const error = outcome.body.error
      assert.strictEqual(error.code, "unknown_fields")
      assert.sameMembers(error.unknown as Array<string>, ["titel", "nope"])
      assert.sameMembers(error.valid_keys as Array<string>, ALL_KEYS)
      assert.include(error.message, "titel")
      assert.strictEqual(handlerRuns, before, "the handler must not run for a refused projection")
      assert.strictEqual(outcome.body._inbox_unread, 0)
      // a wrongly typed projection argument is a validation error, also before the handler
      const bad = yield* dispatcher.call(caller, "sophia.test_rows", { compact: "yes" })
      assert.isFalse(bad.ok)
      if (!bad.ok) assert.strictEqual(bad.body.error.code, "validation_error")
      assert.strictEqual(handlerRuns, before)
    }).pipe(Effect.provide(ProjectionApp)))

  it.effect("advertises compact/fields in the input schema and optional row keys in the output schema", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      const tool = registry.tools.find((t) => t.name === "sophia.test_rows")!
      const input = registry.inputJsonSchema(tool) as any
      assert.strictEqual(input.properties.compact.type, "boolean")
      assert.strictEqual(input.properties.fields.type, "array")
      const output = registry.outputJsonSchema(tool) as any
      assert.isUndefined(output.properties.rows.items.required)
      assert.sameMembers(Object.keys(output.properties.rows.items.properties), ALL_KEYS)
    }).pipe(Effect.provide(ProjectionApp)))
})

/** The keys of top-level output properties that are arrays of objects (envelope fields excluded). */
const listKeys = (output: Record<string, any>): Array<string> =>
  Object.entries((output.properties ?? {}) as Record<string, any>)
    .filter(([key, value]) =>
      !key.startsWith("_") && value?.type === "array" && (value.items?.type === "object" || value.items?.properties)
    )
    .map(([key]) => key)

/**
 * Not list tools: their arrays are small bounded parts of one summary object (orient's open waits and
 * claimed work), not pages of rows, so a row projection would not mean anything there.
 */
// orient: a bootstrap whose lists are already bounded summaries; post_receipts: one post's recipients, at most
// the user's connections with four short fields each — a projection would cost every agent more in tools/list
// (its compact/fields keys) than it could ever save in a reply; panorama: a bootstrap like orient, with its own
// `compact` (the default) that keeps the whole within its token budget and counts what it cuts
const NOT_LISTS: ReadonlySet<string> = new Set(["sophia.orient", "sophia.post_receipts", "sophia.panorama"])

/** The tools of a registry whose result has a list of objects but no `projection` declared over one of them. */
const missingProjections = (registry: Registry): Array<string> =>
  registry.tools.flatMap((tool) => {
    const lists = listKeys(registry.outputJsonSchema(tool))
    if (lists.length === 0 || NOT_LISTS.has(tool.name)) return []
    return tool.projection && lists.includes(tool.projection.key) ? [] : [`${tool.name} (${lists.join(", ")})`]
  })

describe("every list-returning tool of the live registry declares a projection", () => {
  it.effect("any tool whose result has an array of objects declares `projection` over one of those arrays", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      assert.deepStrictEqual(missingProjections(registry), [], "list-returning tools without a projection")
      for (const tool of registry.tools) {
        if (!tool.projection || NOT_LISTS.has(tool.name)) continue
        if (!listKeys(registry.outputJsonSchema(tool)).includes(tool.projection.key)) continue
        // the declared compact keys exist in the row, and the row Schema is the list's item Schema
        const rowKeys = Object.keys(tool.projection.row.fields)
        for (const k of tool.projection.compact) assert.include(rowKeys, k, `${tool.name}: compact key ${k}`)
        const items = (registry.outputJsonSchema(tool) as any).properties[tool.projection.key].items
        assert.sameMembers(Object.keys(items.properties), rowKeys, `${tool.name}: row Schema of ${tool.projection.key}`)
        const input = registry.inputJsonSchema(tool) as any
        assert.isDefined(input.properties.compact, `${tool.name} advertises compact`)
        assert.isDefined(input.properties.fields, `${tool.name} advertises fields`)
      }
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("the check itself catches a list tool that forgot its projection, or declared it over no list", () =>
    Effect.sync(() => {
      const forgot = defineTool({ ...listTool, name: "sophia.test_forgot", projection: undefined })
      const elsewhere = defineTool({ ...listTool, name: "sophia.test_elsewhere", projection: { ...listTool.projection!, key: "total" } })
      const registry = makeRegistry([listTool, forgot, elsewhere, previewTool])
      assert.deepStrictEqual(missingProjections(registry), ["sophia.test_forgot (rows)", "sophia.test_elsewhere (rows)"])
    }))
})
