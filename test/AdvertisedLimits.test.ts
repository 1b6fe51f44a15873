/**
 * Every limit the daemon enforces on an argument is in the tool's advertised JSON Schema (docs/architecture.md,
 * "Limits"; issue 27): for each audited argument, `tools/list` carries the limit, a call just over it is
 * refused, and a call at it gets past every argument check. A limit no keyword can say (bytes of UTF-8 or of
 * JSON, a depth, a sum over items, the HTTP request's size) is in the description, checked here too.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { DEFAULT_MAX_BODY_BYTES } from "../src/mcp/Http.js"
import { ToolRegistry } from "../src/mcp/Registry.js"
import { connect } from "./support/Fixtures.js"

type Json = Record<string, any>

/** The refusal code of a call, or "ok" (a call at a limit may still be refused for another reason, named in `passes`). */
const outcome = (caller: Caller, tool: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(
    Effect.map((o) => (o.ok ? "ok" : String((o.body as Json).error?.code)))
  )

/** The advertised input schema of a tool, as `tools/list` sends it (dotted names). */
const advertised = (tool: string) =>
  Effect.map(ToolRegistry, (registry) => {
    const listed = registry.listFor("portal", "dotted").find((t) => t.name === tool)
    assert.isDefined(listed, tool)
    return listed!
  })

/** Walk a schema by property names; `[]` steps into an array's items. */
const at = (schema: Json, path: ReadonlyArray<string>): Json =>
  path.reduce((node: Json, key) => {
    if (key === "[]") return node.items
    if (node.properties?.[key] !== undefined) return node.properties[key]
    // a union of objects (ledger events): the member that has the key
    const member = (node.anyOf ?? node.items?.anyOf ?? []).find((m: Json) => m.properties?.[key] !== undefined)
    assert.isDefined(member, `no ${key} in ${JSON.stringify(node).slice(0, 200)}`)
    return member.properties[key]
  }, schema)

interface Case {
  readonly tool: string
  readonly path: ReadonlyArray<string>
  readonly keyword: "maxLength" | "maxItems" | "maximum"
  readonly limit: number
  /** the arguments with the value `n` at the audited place */
  readonly args: (n: number) => Json
  /** the code a call just over the limit gets */
  readonly over: string
  /** what a call at the limit may get once past the argument checks (default: ok) */
  readonly passes?: ReadonlyArray<string>
}

const text = (n: number) => "x".repeat(n)
const list = <A>(n: number, f: (i: number) => A) => Array.from({ length: n }, (_, i) => f(i))
const head = "a".repeat(64)
const elevated = ["owner_approval_required"]

const cases: ReadonlyArray<Case> = [
  { tool: "sophia.coordination_post", path: ["body"], keyword: "maxLength", limit: 32 * 1024, args: (n) => ({ channel: "c", kind: "status", body: text(n) }), over: "payload_too_large" },
  { tool: "sophia.coordination_post", path: ["references"], keyword: "maxItems", limit: 32, args: (n) => ({ channel: "c", kind: "status", body: "b", references: list(n, (i) => `doc:${i}`) }), over: "payload_too_large" },
  { tool: "sophia.coordination_post", path: ["references", "[]"], keyword: "maxLength", limit: 512, args: (n) => ({ channel: "c", kind: "status", body: "b", references: [text(n)] }), over: "payload_too_large" },
  { tool: "sophia.coordination_post", path: ["channel"], keyword: "maxLength", limit: 200, args: (n) => ({ channel: text(n), kind: "status", body: "b" }), over: "validation_error" },
  { tool: "sophia.coordination_post", path: ["to"], keyword: "maxLength", limit: 200, args: (n) => ({ channel: "c", kind: "status", body: "b", to: text(n) }), over: "validation_error", passes: ["unknown_recipient"] },
  { tool: "sophia.coordination_inbox", path: ["limit"], keyword: "maximum", limit: 200, args: (n) => ({ limit: n, peek: true }), over: "validation_error" },
  { tool: "sophia.coordination_inbox", path: ["wait_s"], keyword: "maximum", limit: 60, args: (n) => ({ wait_s: n, peek: true }), over: "validation_error" },
  { tool: "sophia.beacon", path: ["status"], keyword: "maxLength", limit: 2000, args: (n) => ({ status: text(n) }), over: "validation_error" },
  { tool: "sophia.orient", path: ["goal"], keyword: "maxLength", limit: 2000, args: (n) => ({ goal: text(n) }), over: "validation_error" },
  { tool: "sophia.declare_wait", path: ["reason"], keyword: "maxLength", limit: 2000, args: (n) => ({ on: "other", predicate: { type: "seq_reached", channel: "c", seq: 1 }, reason: text(n) }), over: "validation_error" },
  { tool: "sophia.ledger_append", path: ["events"], keyword: "maxItems", limit: 100, args: (n) => ({ work_id: "w-many", expected_head: null, events: [{ type: "opened", title: "t" }, ...list(n - 1, (i) => ({ type: "asserted", field: "f", value: i }))] }), over: "validation_error" },
  { tool: "sophia.ledger_append", path: ["events", "title"], keyword: "maxLength", limit: 500, args: (n) => ({ work_id: "w-title", expected_head: null, events: [{ type: "opened", title: text(n) }] }), over: "validation_error" },
  { tool: "sophia.ledger_log", path: ["limit"], keyword: "maximum", limit: 200, args: (n) => ({ work_id: "w-title", limit: n }), over: "validation_error" },
  { tool: "sophia.review_verdict", path: ["notes"], keyword: "maxLength", limit: 4000, args: (n) => ({ request_id: "r", expected_head: head, verdict: "approved", artifact_sha256: head, notes: text(n) }), over: "validation_error", passes: ["not_found", "invalid_transition"] },
  { tool: "sophia.panorama", path: ["since_h"], keyword: "maximum", limit: 720, args: (n) => ({ since_h: n }), over: "validation_error" },
  { tool: "sophia.search", path: ["query"], keyword: "maxLength", limit: 1024, args: (n) => ({ query: text(n) }), over: "validation_error" },
  { tool: "sophia.search", path: ["limit"], keyword: "maximum", limit: 100, args: (n) => ({ query: "q", limit: n }), over: "validation_error" },
  { tool: "sophia.query_knowledge", path: ["limit"], keyword: "maximum", limit: 200, args: (n) => ({ limit: n }), over: "validation_error" },
  { tool: "sophia.add_document", path: ["body"], keyword: "maxLength", limit: 256 * 1024, args: (n) => ({ title: "t", body: text(n) }), over: "validation_error" },
  { tool: "sophia.submit_claim_graph", path: ["claims"], keyword: "maxItems", limit: 100, args: (n) => ({ claims: list(n, () => ({ subject: "s", predicate: "p", object: "o", source_ids: ["doc-none"] })) }), over: "validation_error", passes: ["invalid_grounding_source"] },
  { tool: "sophia.submit_claim_graph", path: ["claims", "[]", "source_ids"], keyword: "maxItems", limit: 32, args: (n) => ({ claims: [{ subject: "s", predicate: "p", object: "o", source_ids: list(n, (i) => `doc-${i}`) }] }), over: "validation_error", passes: ["invalid_grounding_source"] },
  { tool: "sophia.begin_import_session", path: ["documents"], keyword: "maxItems", limit: 500, args: (n) => ({ documents: list(n, (i) => ({ title: `t${i}`, body: "b" })) }), over: "validation_error", passes: elevated },
  { tool: "sophia.approval_status", path: ["approval_id"], keyword: "maxLength", limit: 128, args: (n) => ({ approval_id: text(n) }), over: "validation_error", passes: ["not_found"] },
  { tool: "sophia.execute_code", path: ["timeout_ms"], keyword: "maximum", limit: 30_000, args: (n) => ({ code: "return 1", timeout_ms: n }), over: "validation_error" }
]

describe("advertised limits equal enforced limits", () => {
  it.live("each audited argument: the schema carries the limit, just over is refused, at the limit passes", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("limits")
      const { caller: other } = yield* connect("other")
      // something unread (peeked, never marked), so an inbox long poll at its ceiling returns at once
      yield* outcome(other, "sophia.coordination_post", { channel: "c", kind: "status", body: "seed" })
      for (const c of cases) {
        const name = `${c.tool} ${c.path.join(".")}`
        const listed = yield* advertised(c.tool)
        assert.strictEqual(at(listed.inputSchema as Json, c.path)[c.keyword], c.limit, `${name}: ${c.keyword} advertised`)
        assert.strictEqual(yield* outcome(caller, c.tool, c.args(c.limit + 1)), c.over, `${name}: just over is refused`)
        assert.oneOf(yield* outcome(caller, c.tool, c.args(c.limit)), ["ok", ...(c.passes ?? [])], `${name}: at the limit passes`)
      }
    }).pipe(Effect.provide(SophiaTest)), 120_000)

  it.effect("limits no keyword can say are in the description, and hold: bytes of a body, bytes and depth of JSON, a sum, the request", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("limits")
      const post = (args: Json) => outcome(caller, "sophia.coordination_post", { channel: "c", kind: "status", body: "b", ...args })
      const postSchema = (yield* advertised("sophia.coordination_post")).inputSchema as Json
      // a body in UTF-8 bytes (its maxLength is the most characters such a body can have)
      assert.strictEqual(postSchema.properties.body.description, "≤ 32 KiB UTF-8")
      assert.strictEqual(yield* post({ body: "é".repeat(16 * 1024) }), "ok")
      assert.strictEqual(yield* post({ body: "é".repeat(16 * 1024 + 1) }), "payload_too_large")
      // a payload in bytes of JSON and in depth
      assert.include(postSchema.properties.payload.description, "≤ 8 KiB JSON, depth ≤ 8")
      const payloadOf = (bytes: number) => ({ blob: "x".repeat(bytes - '{"blob":""}'.length) })
      assert.strictEqual(yield* post({ payload: payloadOf(8 * 1024) }), "ok")
      assert.strictEqual(yield* post({ payload: payloadOf(8 * 1024 + 1) }), "payload_too_large")
      const nested = (depth: number): Json => (depth <= 1 ? { leaf: 1 } : { d: nested(depth - 1) })
      assert.strictEqual(yield* post({ payload: nested(8) }), "ok")
      assert.strictEqual(yield* post({ payload: nested(9) }), "validation_error")
      // a ledger value in bytes of JSON and in depth
      const append = (workId: string, value: unknown) =>
        outcome(caller, "sophia.ledger_append", {
          work_id: workId,
          expected_head: null,
          events: [{ type: "opened", title: "t" }, { type: "asserted", field: "f", value }]
        })
      const valueSchema = at((yield* advertised("sophia.ledger_append")).inputSchema as Json, ["events", "value"])
      assert.strictEqual(valueSchema.description, "JSON ≤ 8 KiB, depth ≤ 16")
      assert.strictEqual(yield* append("v-at", "x".repeat(8 * 1024 - 2)), "ok")
      assert.strictEqual(yield* append("v-over", "x".repeat(8 * 1024 - 1)), "validation_error")
      assert.strictEqual(yield* append("v-deep", nested(16)), "ok")
      assert.strictEqual(yield* append("v-deeper", nested(17)), "validation_error")
      // an import: bodies summed over its documents, and the HTTP request that carries it
      const importTool = yield* advertised("sophia.begin_import_session")
      assert.strictEqual(at(importTool.inputSchema as Json, ["documents"]).description, "bodies ≤ 8 Mi chars in all")
      assert.include(importTool.description, `over HTTP a call is ≤ ${DEFAULT_MAX_BODY_BYTES / (1024 * 1024)} MiB`)
      const documents = (n: number, chars: number) => list(n, (i) => ({ title: `t${i}`, body: "x".repeat(chars) }))
      const importing = (docs: unknown) => outcome(caller, "sophia.begin_import_session", { documents: docs })
      assert.strictEqual(yield* importing(documents(32, 256 * 1024)), "owner_approval_required", "8 Mi chars: past the checks")
      assert.strictEqual(yield* importing([...documents(32, 256 * 1024), ...documents(1, 1)]), "validation_error")
    }).pipe(Effect.provide(SophiaTest)), 120_000)

  it.effect("configured limits: the coordination tools advertise what this daemon enforces", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("limits")
      const post = (yield* advertised("sophia.coordination_post")).inputSchema as Json
      const inbox = (yield* advertised("sophia.coordination_inbox")).inputSchema as Json
      assert.deepStrictEqual(
        [post.properties.body.maxLength, post.properties.body.description, post.properties.references.maxItems, post.properties.references.items.maxLength, inbox.properties.limit.maximum],
        [1000, "≤ 1000 bytes UTF-8", 3, 10, 20]
      )
      assert.include(post.properties.payload.description, "≤ 2 KiB JSON, depth ≤ 4")
      const postWith = (args: Json) => outcome(caller, "sophia.coordination_post", { channel: "c", kind: "status", body: "b", ...args })
      assert.strictEqual(yield* postWith({ body: text(1000) }), "ok")
      assert.strictEqual(yield* postWith({ body: text(1001) }), "payload_too_large")
      assert.strictEqual(yield* postWith({ references: ["r", "r", "r", "r"] }), "payload_too_large")
      assert.strictEqual(yield* postWith({ references: [text(11)] }), "payload_too_large")
      assert.strictEqual(yield* outcome(caller, "sophia.coordination_inbox", { limit: 20 }), "ok")
      assert.strictEqual(yield* outcome(caller, "sophia.coordination_inbox", { limit: 21 }), "validation_error")
    }).pipe(
      Effect.provide(SophiaTest.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([
        ["SOPHIA_POST_BODY_MAX_BYTES", "1000"],
        ["SOPHIA_POST_PAYLOAD_MAX_BYTES", "2048"],
        ["SOPHIA_POST_PAYLOAD_MAX_DEPTH", "4"],
        ["SOPHIA_POST_REFERENCES_MAX", "3"],
        ["SOPHIA_POST_REFERENCE_MAX_CHARS", "10"],
        ["SOPHIA_INBOX_LIMIT_MAX", "20"]
      ]))))))
    ))
})
