/**
 * Regression tests for the four defects of issue 12 (each failed before its fix), and the file mode of the
 * SQLite database. docs/architecture.md, "Limits": every free-form JSON value an agent sends is nested at most 16 deep
 * and holds only well-formed Unicode, checked at decode time, so hashing, verifying and replaying can
 * never fail later.
 */
import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { ConfigProvider, Effect, Layer, ManagedRuntime, ParseResult, Schema } from "effect"
import * as fs from "node:fs"
import { JSON_MAX_DEPTH } from "../src/domain/Json.js"
import { SophiaLive } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { HttpServer } from "../src/mcp/Http.js"
import { formatParseError } from "../src/mcp/ParseIssues.js"
import { Ledger } from "../src/services/Ledger.js"
import { sophia, tempDb } from "./support/Cli.js"
import { connect } from "./support/Fixtures.js"
import { ServeTest } from "./support/Serve.js"

/** An array nested `depth` deep around `leaf` (built without recursion). */
const nest = (depth: number, leaf: unknown = 1): unknown => {
  let v: unknown = leaf
  for (let i = 0; i < depth; i++) v = [v]
  return v
}

// gated calls are refused at once instead of waiting for the owner
const NoApprovalWait = Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_APPROVAL_WAIT_MS", "0"]])))
const App = ServeTest().pipe(Layer.provide(NoApprovalWait))

/** POST a JSON text to the REST path; the status and the parsed reply. */
const rest = (tool: string, bearer: string, body: string) =>
  Effect.gen(function*() {
    const { baseUrl } = yield* HttpServer
    return yield* Effect.promise(async () => {
      const r = await fetch(`${baseUrl}/api/tools/${tool}`, {
        method: "POST",
        headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
        body
      })
      return { status: r.status, body: (await r.json()) as any }
    })
  })

const HEAD = "a".repeat(64)

describe("defect 1: one ledger_append could break `sophia ledger verify` for good", () => {
  it.effect("a ledger value nested deeper than 16 is refused with validation_error naming its path; nothing is written", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const ledger = yield* Ledger
      const { caller } = yield* connect("writer", "full")
      for (const depth of [JSON_MAX_DEPTH + 1, 100, 2_500, 50_000]) {
        const outcome = yield* dispatcher.call(caller, "sophia.ledger_append", {
          work_id: `deep-${depth}`,
          expected_head: null,
          events: [{ type: "opened", title: "t" }, { type: "asserted", field: "x", value: nest(depth) }]
        })
        assert.isFalse(outcome.ok, `depth ${depth}`)
        if (!outcome.ok) {
          assert.strictEqual(outcome.body.error.code, "validation_error", `depth ${depth}`)
          assert.include(outcome.body.error.message, "events.1.value", `depth ${depth}`)
          assert.isBelow(outcome.body.error.message.length, 1000)
        }
        assert.isUndefined(yield* ledger.state(caller.userId, `deep-${depth}`), "nothing written")
      }
      // found by the soak fuzz: an asserted event without its value decoded as `undefined` and failed to store
      const missing = yield* dispatcher.call(caller, "sophia.ledger_append", {
        work_id: "no-value",
        expected_head: null,
        events: [{ type: "opened", title: "t" }, { type: "asserted", field: "x" }]
      })
      assert.isFalse(missing.ok)
      if (!missing.ok) {
        assert.strictEqual(missing.body.error.code, "validation_error")
        assert.match(missing.body.error.message, /^events\.1\.value: is missing/)
      }
      // exactly 16 deep is within the limit, and verifies
      const ok = yield* dispatcher.call(caller, "sophia.ledger_append", {
        work_id: "deep-16",
        expected_head: null,
        events: [{ type: "opened", title: "t" }, { type: "asserted", field: "x", value: nest(JSON_MAX_DEPTH) }]
      })
      assert.isTrue(ok.ok, JSON.stringify(ok.body))
      assert.isTrue((yield* ledger.verify()).ok)
    }).pipe(Effect.provide(App)))

  it.effect("verify reports an event it cannot hash as a break with its work item and seq, and does not die", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const ledger = yield* Ledger
      const sql = yield* SqlClient.SqlClient
      const { caller } = yield* connect("writer", "full")
      const opened = yield* dispatcher.call(caller, "sophia.ledger_append", {
        work_id: "older-build",
        expected_head: null,
        events: [{ type: "opened", title: "t" }, { type: "asserted", field: "x", value: 1 }]
      })
      assert.isTrue(opened.ok)
      // what an older build accepted on a warm stack: a value thousands deep, stored as JSON text
      const deep = "[".repeat(200_000) + "]".repeat(200_000)
      yield* sql`UPDATE ledger_events SET data = ${`{"field":"x","value":${deep}}`}
        WHERE work_id = 'older-build' AND seq = 2`
      const report = yield* ledger.verify()
      assert.isFalse(report.ok)
      assert.strictEqual(report.first_break?.work_id, "older-build")
      assert.strictEqual(report.first_break?.seq, 2)
      assert.match(report.first_break!.reason, /cannot be hashed/)
    }).pipe(Effect.provide(App)))

  it("`sophia ledger verify` prints its report and exits non-zero on an event it cannot hash (real process)", async () => {
    const db = tempDb()
    const runtime = ManagedRuntime.make(SophiaLive(db))
    try {
      await runtime.runPromise(Effect.gen(function*() {
        const dispatcher = yield* Dispatcher
        const sql = yield* SqlClient.SqlClient
        const { caller } = yield* connect("writer", "full")
        const r = yield* dispatcher.call(caller, "sophia.ledger_append", {
          work_id: "w-1",
          expected_head: null,
          events: [{ type: "opened", title: "t" }, { type: "asserted", field: "x", value: 1 }, { type: "claimed" }]
        })
        assert.isTrue(r.ok)
        const deep = "[".repeat(200_000) + "]".repeat(200_000)
        yield* sql`UPDATE ledger_events SET data = ${`{"field":"x","value":${deep}}`} WHERE work_id = 'w-1' AND seq = 2`
      }))
    } finally {
      await runtime.dispose()
    }
    const verify = sophia(["ledger", "verify", "--db", db])
    assert.strictEqual(verify.status, 1, verify.stderr)
    const report = JSON.parse(verify.stdout.trim().split("\n").at(-1)!)
    assert.isFalse(report.ok)
    assert.strictEqual(report.first_break.work_id, "w-1")
    assert.strictEqual(report.first_break.seq, 2)
    const errLines = verify.stderr.trim().split("\n")
    assert.strictEqual(errLines.length, 1, verify.stderr)
    assert.include(errLines[0], "w-1 seq 2")
  }, 120_000)
})

describe("defect 2: deeply nested wrong-typed arguments gave internal_error", () => {
  it.effect("every tool refuses 3,000-deep arguments in each declared argument with validation_error naming it", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("prober", "full")
      const deep = nest(3_000, "x")
      for (const tool of dispatcher.registry.tools) {
        const schema = dispatcher.registry.inputJsonSchema(tool) as { properties?: Record<string, unknown> }
        const names = Object.keys(schema.properties ?? {})
        for (const name of names.length > 0 ? names : ["anything"]) {
          const outcome = yield* dispatcher.call(caller, tool.name, { [name]: deep })
          assert.isFalse(outcome.ok, `${tool.name}.${name}`)
          if (!outcome.ok) {
            assert.strictEqual(outcome.body.error.code, "validation_error", `${tool.name}.${name}: ${outcome.body.error.message}`)
            assert.match(outcome.body.error.message, new RegExp(`(^|; )${name}(\\.|:)`), `${tool.name}.${name}`)
          }
        }
      }
    }).pipe(Effect.provide(App)), 60_000)

  it.effect("over REST: sophia.orient with goal nested 3,000 deep is a 400 validation_error, not a 500", () =>
    Effect.gen(function*() {
      const { bearer } = yield* connect("rest", "full")
      const r = yield* rest("sophia.orient", bearer, `{"goal":${"[".repeat(3_000)}"x"${"]".repeat(3_000)}}`)
      assert.strictEqual(r.status, 400)
      assert.strictEqual(r.body.error.code, "validation_error")
      assert.match(r.body.error.message, /^goal/)
    }).pipe(Effect.provide(App)))

  it("the refusal formatter never recurses into the value it reports, and keeps its message short", () => {
    const value = nest(300_000, "x")
    const huge = "y".repeat(1_000_000)
    const schema = Schema.Struct({ goal: Schema.String, other: Schema.Number, list: Schema.Array(Schema.Number) })
    const failed = Schema.decodeUnknownEither(schema, { errors: "all" })({ goal: value, other: huge, list: value })
    assert.strictEqual(failed._tag, "Left")
    if (failed._tag === "Left") {
      const message = formatParseError(failed.left)
      assert.match(message, /^goal: Expected string, actual \[\[\[/)
      assert.include(message, "other: Expected number, actual \"yyy")
      assert.isBelow(message.length, 1_000)
      assert.instanceOf(failed.left, ParseResult.ParseError)
    }
  })
})

describe("defect 5: a discriminant the decoder could not read gave internal_error (found by the schema fuzz)", () => {
  // Effect's union decoding calls String() on the discriminant: a JSON object whose own `toString` is no function throws
  it.effect("declare_wait with predicate.type {\"toString\": 1}: validation_error over the dispatcher and REST; no wait recorded", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const sql = yield* SqlClient.SqlClient
      const { bearer, caller } = yield* connect("waiter", "full")
      const args = { on: "someone", predicate: { type: { toString: 1, valueOf: [] }, channel: "c", seq: 1 }, reason: "x" }
      const outcome = yield* dispatcher.call(caller, "sophia.declare_wait", args)
      assert.isFalse(outcome.ok)
      if (!outcome.ok) assert.strictEqual(outcome.body.error.code, "validation_error", outcome.body.error.message)
      const r = yield* rest("sophia.declare_wait", bearer, JSON.stringify(args))
      assert.strictEqual(r.status, 400)
      assert.strictEqual(r.body.error.code, "validation_error")
      assert.strictEqual(Number((yield* sql<{ n: number }>`SELECT COUNT(*) AS n FROM waits`)[0]!.n), 0)
    }).pipe(Effect.provide(App)))
})

describe("defect 3: lone surrogates passed validation and broke hashing", () => {
  it.effect("ledger title, resolution, review uri and any argument of a gated call: validation_error naming the path", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const ledger = yield* Ledger
      const { caller } = yield* connect("worker", "full")
      const { caller: assistant } = yield* connect("helper", "assistant")
      const refused = (name: string, args: unknown, by = caller) =>
        Effect.map(dispatcher.call(by, name, args), (outcome) => {
          assert.isFalse(outcome.ok, `${name} ${JSON.stringify(args)}`)
          return outcome.ok ? { code: "", message: "" } : outcome.body.error
        })
      const title = yield* refused("sophia.ledger_append", { work_id: "s-1", expected_head: null, events: [{ type: "opened", title: "a\ud800b" }] })
      assert.strictEqual(title.code, "validation_error")
      assert.match(title.message, /^events\.0\.title: .*surrogate/)
      assert.isUndefined(yield* ledger.state(caller.userId, "s-1"))

      const created = yield* dispatcher.call(caller, "sophia.ledger_append", {
        work_id: "s-2",
        expected_head: null,
        events: [{ type: "opened", title: "ok 😀" }]
      })
      assert.isTrue(created.ok, "a well-formed astral character is fine")
      const head = created.ok ? (created.body.head as string) : HEAD
      const resolution = yield* refused("sophia.ledger_append", { work_id: "s-2", expected_head: head, events: [{ type: "closed", resolution: "\udc00" }] })
      assert.strictEqual(resolution.code, "validation_error")
      assert.match(resolution.message, /^events\.0\.resolution: /)
      const uri = yield* refused("sophia.review_request", { work_id: "s-2", expected_head: head, artifact: { uri: "file:///\ud83d", sha256: HEAD } })
      assert.strictEqual(uri.code, "validation_error")
      assert.match(uri.message, /^artifact\.uri: /)
      const key = yield* refused("sophia.ledger_append", { work_id: "s-2", expected_head: head, events: [{ type: "asserted", field: "f", value: { "k\ud800": 1 } }] })
      assert.strictEqual(key.code, "validation_error")
      assert.match(key.message, /^events\.0\.value\.k\uFFFD: /, "the path names the key, made well-formed")

      // an assistant's write is bound to its exact arguments by an approval: those must be hashable too
      const gated = yield* refused("sophia.add_document", { title: "\ud800", body: "b" }, assistant)
      assert.strictEqual(gated.code, "validation_error")
      assert.match(gated.message, /^title: /)
      const extra = yield* refused("sophia.add_document", { title: "t", body: "b", note: ["\udfff"] }, assistant)
      assert.strictEqual(extra.code, "validation_error", "even an argument the tool ignores")
      assert.match(extra.message, /^note\.0: /)
      const fine = yield* refused("sophia.add_document", { title: "t", body: "b" }, assistant)
      assert.strictEqual(fine.code, "approval_required", "the same call with well-formed text asks for an approval")
      assert.isTrue((yield* ledger.verify()).ok)
    }).pipe(Effect.provide(App)))

  it.effect("over REST the same refusals are 400 validation_error, never 500", () =>
    Effect.gen(function*() {
      const { bearer } = yield* connect("rest", "assistant")
      const append = yield* rest(
        "sophia.ledger_append",
        bearer,
        `{"work_id":"r-1","expected_head":null,"events":[{"type":"opened","title":"\\ud800"}]}`
      )
      assert.strictEqual(append.status, 400)
      assert.strictEqual(append.body.error.code, "validation_error")
      const gated = yield* rest("sophia.add_document", bearer, `{"title":"t","body":"\\udc00x"}`)
      assert.strictEqual(gated.status, 400)
      assert.strictEqual(gated.body.error.code, "validation_error")
      assert.match(gated.body.error.message, /^body: /)
    }).pipe(Effect.provide(App)))
})

describe("defect 4: get_sdk_types accepted arguments that are not an object", () => {
  it.effect("every tool refuses arguments that are not a JSON object (dispatcher)", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("prober", "full")
      for (const tool of dispatcher.registry.tools) {
        for (const args of [42, "x", [], [{}], true, null]) {
          const outcome = yield* dispatcher.call(caller, tool.name, args)
          assert.isFalse(outcome.ok, `${tool.name} ${JSON.stringify(args)}`)
          if (!outcome.ok) {
            assert.strictEqual(outcome.body.error.code, "validation_error")
            assert.match(outcome.body.error.message, /^arguments: /)
          }
        }
      }
      assert.isTrue((yield* dispatcher.call(caller, "sophia.get_sdk_types", {})).ok)
      assert.isTrue((yield* dispatcher.call(caller, "sophia.get_sdk_types", undefined)).ok, "no arguments at all is {}")
    }).pipe(Effect.provide(App)), 60_000)

  it.effect("over REST: 42, \"x\" and [] are 400 validation_error", () =>
    Effect.gen(function*() {
      const { bearer } = yield* connect("rest", "full")
      for (const body of ["42", "\"x\"", "[]"]) {
        const r = yield* rest("sophia.get_sdk_types", bearer, body)
        assert.strictEqual(r.status, 400, body)
        assert.strictEqual(r.body.error.code, "validation_error", body)
      }
      assert.strictEqual((yield* rest("sophia.get_sdk_types", bearer, "{}")).status, 200)
      assert.strictEqual((yield* rest("sophia.get_sdk_types", bearer, "")).status, 200, "an empty body is no arguments")
    }).pipe(Effect.provide(App)))
})

describe("the SQLite database is the owner's alone", () => {
  it("the database file and its WAL are created mode 0600, whatever the umask", async () => {
    const db = tempDb()
    const previous = process.umask(0)
    try {
      const runtime = ManagedRuntime.make(SophiaLive(db))
      try {
        await runtime.runPromise(Effect.gen(function*() {
          const { caller } = yield* connect("writer", "full")
          const dispatcher = yield* Dispatcher
          yield* dispatcher.call(caller, "sophia.coordination_post", { channel: "c", kind: "status", body: "b" })
        }))
        for (const file of [db, `${db}-wal`, `${db}-shm`]) {
          assert.isTrue(fs.existsSync(file), file)
          assert.strictEqual((fs.statSync(file).mode & 0o777).toString(8), "600", file)
        }
      } finally {
        await runtime.dispose()
      }
    } finally {
      process.umask(previous)
    }
  })
})
