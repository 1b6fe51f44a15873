import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import ts from "typescript"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { APPEND_ONLY, defineTool, makeRegistry, READ_ONLY, ToolRegistry } from "../src/mcp/Registry.js"
import { camelMapping, camelName, canonicalFromCamel, generateDeclarations, pascalName } from "../src/mcp/SdkTypes.js"
import { surfaceHash } from "../src/mcp/Catalog.js"
import { connect } from "./support/Fixtures.js"

/**
 * Type-check in-memory files with the real TypeScript compiler (strict, ES2022 lib, no @types).
 * Returns the diagnostics as text; empty = compiles.
 */
const libCache = new Map<string, ts.SourceFile | undefined>()
const typeCheck = (files: Record<string, string>): Array<string> => {
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    lib: ["lib.es2022.d.ts"],
    types: [],
    noUnusedLocals: false
  }
  const host = ts.createCompilerHost(options)
  const virtual = (name: string) => files[name.replace(/\\/g, "/")]
  const getSourceFile = host.getSourceFile.bind(host)
  host.getSourceFile = (name, version, ...rest) => {
    const text = virtual(name)
    if (text !== undefined) return ts.createSourceFile(name, text, version)
    // the compiler's own lib files are parsed once for the whole suite
    if (!libCache.has(name)) libCache.set(name, getSourceFile(name, version, ...rest))
    return libCache.get(name)
  }
  const fileExists = host.fileExists.bind(host)
  host.fileExists = (name) => virtual(name) !== undefined || fileExists(name)
  const readFile = host.readFile.bind(host)
  host.readFile = (name) => virtual(name) ?? readFile(name)
  const program = ts.createProgram(Object.keys(files), options, host)
  return ts.getPreEmitDiagnostics(program).map((d) =>
    `${d.file?.fileName ?? ""}:${
      d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : ""
    } ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`
  )
}

const DECL = "/virtual/sophia.d.ts"
const SNIPPET = "/virtual/snippet.ts"

/**
 * Each snippet (its own script file, one program for all) must fail to compile, and only in itself:
 * the declarations stay clean.
 */
const assertEachFails = (declarations: string, control: string, snippets: Record<string, string>) => {
  const entries = Object.entries(snippets)
  const fileOf = (i: number) => `/virtual/wrong_${i}.ts`
  // each in its own function scope so that the files cannot clash with each other
  const files = Object.fromEntries(entries.map(([, code], i) => [fileOf(i), `function wrong_${i}() {\n${code}\n}\n`]))
  const CONTROL = "/virtual/control.ts"
  const errors = typeCheck({ [DECL]: declarations, [CONTROL]: `function control() {\n${control}\n}\n`, ...files })
  assert.deepStrictEqual(errors.filter((e) => e.startsWith(DECL) || e.startsWith(CONTROL)), [], "declarations and control compile")
  entries.forEach(([why], i) => {
    assert.isTrue(errors.some((e) => e.startsWith(fileOf(i) + ":")), `${why} must not compile`)
  })
}

/** Throwaway tools with the shapes a generator can get wrong: unions, tuples, records, nullables, a projection. */
const Item = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literal("a", "b"),
  size: Schema.NullOr(Schema.Number),
  labels: Schema.Record({ key: Schema.String, value: Schema.Number }),
  "odd-key": Schema.optional(Schema.Boolean)
})
const widgetList = defineTool({
  name: "sophia.widget_list",
  group: "widgets",
  access: "read",
  description: "List widgets. Doc comment with a */ inside must not break the file.",
  annotations: READ_ONLY,
  input: Schema.Struct({
    filter: Schema.optional(Schema.Union(
      Schema.Struct({ type: Schema.Literal("by_kind"), kind: Schema.Literal("a", "b") }),
      Schema.Struct({ type: Schema.Literal("by_id"), ids: Schema.Array(Schema.String) })
    )),
    range: Schema.optional(Schema.Tuple(Schema.Number, Schema.Number))
  }),
  output: Schema.Struct({ widgets: Schema.Array(Item), cursor: Schema.NullOr(Schema.String) }),
  projection: { key: "widgets", row: Item, compact: ["id", "kind"] },
  handler: () => Effect.succeed({ widgets: [], cursor: null })
})
const widgetMake = defineTool({
  name: "sophia.widget_make_v2",
  group: "widgets",
  access: "write",
  description: "Make a widget.",
  annotations: APPEND_ONLY,
  input: Schema.Struct({
    name: Schema.String.pipe(Schema.minLength(1)).annotations({ description: "the widget's name" }),
    payload: Schema.optional(Schema.Unknown),
    count: Schema.optional(Schema.Int)
  }),
  output: Schema.Struct({ widget_id: Schema.String, warning: Schema.optional(Schema.String) }),
  handler: () => Effect.succeed({ widget_id: "w1" })
})

describe("SDK types: camelCase mapping", () => {
  it("maps canonical names to camelCase methods and back through the registry's names", () => {
    assert.strictEqual(camelName("sophia.coordination_post"), "coordinationPost")
    assert.strictEqual(camelName("sophia.query_knowledge"), "queryKnowledge")
    assert.strictEqual(camelName("sophia.orient"), "orient")
    assert.strictEqual(camelName("sophia_get_sdk_types"), "getSdkTypes")
    assert.strictEqual(camelName("sophia.widget_make_v2"), "widgetMakeV2")
    assert.strictEqual(pascalName("sophia.capability_catalog"), "CapabilityCatalog")
    const names = ["sophia.coordination_post", "sophia.query_knowledge", "sophia.orient"]
    const mapping = camelMapping(names)
    for (const name of names) assert.strictEqual(mapping.get(camelName(name)), name)
    assert.strictEqual(canonicalFromCamel("queryKnowledge", names), "sophia.query_knowledge")
    assert.isUndefined(canonicalFromCamel("queryKnowledges", names))
    assert.throws(() => camelMapping(["sophia.a_b", "sophia.a__b"]), /both map/)
  })
})

describe("SDK types: generated declarations compile with tsc", () => {
  it.effect("the live surface's declarations compile, and a snippet using several methods type-checks", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const registry = yield* ToolRegistry
      const { caller } = yield* connect("coder", "full")
      const outcome = yield* dispatcher.call(caller, "sophia.get_sdk_types", {})
      assert.isTrue(outcome.ok)
      const declarations = outcome.body.declarations as string
      // one method per advertised tool, derived from the registry
      for (const listed of registry.listFor("full", "dotted")) {
        assert.include(declarations, `function ${camelName(listed.name)}(`, listed.name)
      }
      const snippet = `
        async function main(): Promise<number> {
          const [me, catalog, types] = await Promise.all([
            sophia.orient({ goal: "check the surface" }),
            sophia.capabilityCatalog({ brief: true }),
            sophia.getSdkTypes()
          ])
          const total: number = catalog.total_tools
          const hash: string = catalog.version_hash
          const groups: string[] = Object.keys(catalog.groups)
          const firstName: string | undefined = catalog.groups[groups[0]]?.[0]?.name
          const unread: number = me._inbox_unread + types._inbox_unread
          const blocking = catalog._blocking?.map((b) => b.on.agent_name) ?? []
          const decl: string = types.declarations
          const mine = await sophia.coordinationInbox({ to_me: true, peek: true, limit: 200 })
          const addressed: number = mine.posts.filter((p) => p.to_connection_id !== null).length
          return total + unread + hash.length + decl.length + blocking.length + (firstName?.length ?? 0) + addressed
        }
        main()
      `
      const errors = typeCheck({ [DECL]: declarations, [SNIPPET]: snippet })
      assert.deepStrictEqual(errors, [])
    }).pipe(Effect.provide(SophiaTest)), 120_000)

  it.effect("a snippet with type errors fails to compile, each for the right reason", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("coder", "full")
      const outcome = yield* dispatcher.call(caller, "sophia.get_sdk_types", {})
      const declarations = outcome.body.declarations as string
      const wrong = {
        "wrong argument type": `sophia.capabilityCatalog({ brief: "yes" })`,
        "unknown method": `sophia.capabilityCatalogue({})`,
        "unknown result field": `sophia.capabilityCatalog({}).then((c) => c.tool_count)`,
        "wrong result type": `sophia.getSdkTypes().then((t) => { const n: number = t.declarations })`
      }
      assertEachFails(declarations, `sophia.capabilityCatalog({ brief: true }).then((c) => c.total_tools)`, wrong)
    }).pipe(Effect.provide(SophiaTest)), 120_000)

  it("handles unions, tuples, records, nullables, odd keys, projections and envelope fields", () => {
    const registry = makeRegistry([widgetList, widgetMake])
    const declarations = generateDeclarations(registry)
    const good = `
      async function main() {
        const page = await sophia.widgetList({ filter: { type: "by_id", ids: ["w1"] }, range: [0, 10], compact: true })
        const all = await sophia.widgetList()
        const picked = await sophia.widgetList({ fields: ["id", "labels"] })
        const w = page.widgets[0]
        // projected rows may lack any key
        const id: string | undefined = w?.id
        const size: number | null | undefined = w?.size
        const label: number | undefined = picked.widgets[0]?.labels?.["x"]
        const odd: boolean | undefined = all.widgets[0]?.["odd-key"]
        const cursor: string | null = page.cursor
        const unread: number = page._inbox_unread
        const made = await sophia.widgetMakeV2({ name: "x", payload: { any: ["thing"] }, count: 2 })
        const warning: string | undefined = made.warning
        return [id, size, label, odd, cursor, unread, made.widget_id, warning]
      }
      main()
    `
    assert.deepStrictEqual(typeCheck({ [DECL]: declarations, [SNIPPET]: good }), [])
    const bad = {
      "wrong discriminant": `sophia.widgetList({ filter: { type: "by_kind", ids: ["w1"] } })`,
      "tuple too long": `sophia.widgetList({ range: [0, 1, 2] })`,
      "missing required argument": `sophia.widgetMakeV2({})`,
      "no arguments for a tool with a required one": `sophia.widgetMakeV2()`,
      "compact is boolean": `sophia.widgetList({ compact: 1 })`,
      "kind is a literal union": `sophia.widgetList().then((p) => { const k: "c" | undefined = p.widgets[0]?.kind })`
    }
    assertEachFails(declarations, `sophia.widgetList({ compact: true }).then((p) => p.widgets[0]?.kind)`, bad)
    // doc comments come from the descriptions, and `*/` inside one is escaped
    assert.include(declarations, "/** the widget's name */")
    assert.include(declarations, "with a *\\/ inside")
  }, 120_000)

  it.effect("the declarations follow the registry: a new tool adds a method and moves the version hash", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      const before = generateDeclarations(registry)
      const grown = makeRegistry([...registry.tools, widgetMake])
      const after = generateDeclarations(grown)
      assert.notStrictEqual(after, before)
      assert.notInclude(before, "function widgetMakeV2(")
      assert.include(after, "function widgetMakeV2(")
      assert.deepStrictEqual(typeCheck({ [DECL]: after, [SNIPPET]: `sophia.widgetMakeV2({ name: "n" })` }), [])
      assert.notStrictEqual(surfaceHash(grown, grown.tools), surfaceHash(registry, registry.tools))
      // and the same tools always yield the same text
      assert.strictEqual(generateDeclarations(makeRegistry(registry.tools)), before)
    }).pipe(Effect.provide(SophiaTest)), 120_000)

  it.effect("an observer's declarations hold only what it may call", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const registry = yield* ToolRegistry
      const { caller } = yield* connect("watcher", "observer")
      const outcome = yield* dispatcher.call(caller, "sophia.get_sdk_types", {})
      const declarations = outcome.body.declarations as string
      for (const tool of registry.tools) {
        const declared = declarations.includes(`function ${camelName(tool.name)}(`)
        assert.strictEqual(declared, tool.access === "read", tool.name)
      }
      const catalog = yield* dispatcher.call(caller, "sophia.capability_catalog", { brief: true })
      assert.strictEqual(outcome.body.version_hash, catalog.body.version_hash)
    }).pipe(Effect.provide(SophiaTest)))
})
