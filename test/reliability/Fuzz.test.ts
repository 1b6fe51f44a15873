/**
 * Schema-derived fuzz of every registered tool, through the dispatcher and through the REST path of a
 * served HTTP transport, over a SQLite file: inputs built from each tool's advertised JSON Schema plus
 * hostile mutations (test/support/SchemaFuzz.ts). For every input: no 5xx and no `internal_error`, every
 * refusal carries a stable code, every success is valid against the tool's output schema, and a refused
 * call writes nothing (watched by triggers on every table). Afterwards `ledger verify` is clean.
 */
import { assert, describe, it } from "@effect/vitest"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import Sqlite from "better-sqlite3"
import { ConfigProvider, Effect, Layer, ManagedRuntime } from "effect"
import fc from "fast-check"
import { performance } from "node:perf_hooks"
import { SophiaLive } from "../../src/layers/App.js"
import { Dispatcher } from "../../src/mcp/Dispatch.js"
import * as Http from "../../src/mcp/Http.js"
import { Ledger } from "../../src/services/Ledger.js"
import { tempDb } from "../support/Cli.js"
import { connect } from "../support/Fixtures.js"
import { Dictionary, inputArb } from "../support/SchemaFuzz.js"
import { FUZZ_RUNS, report, SEED, SOAK } from "./Mode.js"

/** docs/architecture.md, "Refusal codes" (docs/refusal-codes.md): the only codes a refusal may carry. */
const STABLE_CODES = new Set([
  "unauthenticated",
  "forbidden_profile",
  "approval_required",
  "approval_denied",
  "owner_approval_required",
  "validation_error",
  "unknown_fields",
  "not_found",
  "unknown_recipient",
  "ambiguous_recipient",
  "payload_too_large",
  "head_moved",
  "evidence_downgrade",
  "self_certification",
  "invalid_transition",
  "wait_cycle",
  "invalid_grounding_source",
  "sandbox_timeout",
  "sandbox_memory_limit",
  "sandbox_call_cap",
  "sandbox_error",
  "rate_limited",
  "busy",
  "lease_conflict"
])
/** Refusals whose point is a write: the pending approval the owner decides on. */
const REFUSALS_THAT_RECORD = new Set(["approval_required", "owner_approval_required"])
/** Bookkeeping any call may do (last seen of the caller; delivering a wait's resolution in the envelope). */
const BOOKKEEPING_COLUMNS: Record<string, ReadonlyArray<string>> = { connections: ["last_seen_at"], waits: ["delivered_at"] }

/**
 * Record every write to every table in `fuzz_writes`, from inside the writer's own transaction (so a
 * rolled-back write leaves no record either). Virtual tables and their shadow tables are left out.
 */
const watchWrites = (db: Sqlite.Database) => {
  db.exec("CREATE TABLE IF NOT EXISTS fuzz_writes (tbl TEXT NOT NULL, op TEXT NOT NULL)")
  const tables = db.prepare<[], { name: string; sql: string }>(
    "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'fuzz_writes'"
  ).all()
  const virtual = tables.filter((t) => /^CREATE VIRTUAL TABLE/i.test(t.sql)).map((t) => t.name)
  const watched = tables.filter((t) => !virtual.some((v) => t.name === v || t.name.startsWith(`${v}_`)))
  for (const { name } of watched) {
    const q = `"${name}"`
    const columns = db.prepare<[], { name: string }>(`PRAGMA table_info(${q})`).all().map((c) => c.name)
      .filter((c) => !(BOOKKEEPING_COLUMNS[name] ?? []).includes(c))
    const changed = columns.map((c) => `OLD."${c}" IS NOT NEW."${c}"`).join(" OR ") || "0"
    db.exec(`
      CREATE TRIGGER "fuzz_i_${name}" AFTER INSERT ON ${q} BEGIN INSERT INTO fuzz_writes VALUES ('${name}', 'insert'); END;
      CREATE TRIGGER "fuzz_d_${name}" AFTER DELETE ON ${q} BEGIN INSERT INTO fuzz_writes VALUES ('${name}', 'delete'); END;
      CREATE TRIGGER "fuzz_u_${name}" AFTER UPDATE ON ${q} WHEN ${changed} BEGIN INSERT INTO fuzz_writes VALUES ('${name}', 'update'); END;
    `)
  }
  const count = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM fuzz_writes")
  const since = db.prepare<[number], { tbl: string; op: string }>("SELECT tbl, op FROM fuzz_writes WHERE rowid > ?")
  return { count: () => count.get()!.n, since: (n: number) => since.all(n), tables: watched.length }
}

describe("schema-derived fuzz", () => {
  it(`every tool, ${FUZZ_RUNS} inputs each through the dispatcher and the REST path: no 5xx, no internal_error, nothing written by a refusal`, async () => {
    const db = tempDb()
    const AppLayer = Http.layer({ host: "127.0.0.1", port: 0, naming: "underscore" }).pipe(
      Layer.provideMerge(SophiaLive(db)),
      // gated calls are refused at once (they would otherwise wait for the owner)
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_APPROVAL_WAIT_MS", "0"]]))))
    )
    const runtime = ManagedRuntime.make(AppLayer)
    const raw = new Sqlite(db)
    try {
      const { assistant, dispatcher, full, http, peer } = await runtime.runPromise(Effect.gen(function*() {
        return {
          dispatcher: yield* Dispatcher,
          http: yield* Http.HttpServer,
          full: yield* connect("fuzz-full", "full"),
          assistant: yield* connect("fuzz-assistant", "assistant"),
          peer: yield* connect("fuzz-peer", "full")
        }
      }))
      const writes = watchWrites(raw)
      const dict = new Dictionary()
      for (const c of [full, assistant, peer]) {
        dict.add(c.caller.connectionId)
        dict.add(c.caller.connectionShort)
        dict.add(c.caller.name)
      }
      const callers = [full, assistant]
      const validator = new AjvJsonSchemaValidator()
      const registry = dispatcher.registry
      const validators = new Map(registry.tools.map((t) => [t.name, validator.getValidator(registry.outputJsonSchema(t) as any)]))

      // a few ordinary calls first, so the dictionary holds live heads and ids
      const seedCalls: Array<[string, unknown]> = [
        ["sophia.ledger_append", { work_id: "fuzz-w", expected_head: null, events: [{ type: "opened", title: "fuzz" }, { type: "claimed" }] }],
        ["sophia.coordination_post", { channel: "arc:fuzz-w", kind: "question", body: "seed", to: peer.caller.name }],
        ["sophia.add_document", { title: "seed", body: "seed document" }],
        ["sophia.submit_claim_graph", { claims: [{ subject: "s", predicate: "p", object: "o", source_ids: ["x"] }] }]
      ]
      for (const [name, args] of seedCalls) {
        const o = await runtime.runPromise(dispatcher.call(full.caller, name, args))
        dict.harvest(o.body)
      }

      const stats = { inputs: 0, calls: 0, ok: 0, refused: 0, byCode: new Map<string, number>() }
      const failures: Array<string> = []
      const fail = (message: string) => {
        failures.push(message)
        throw new Error(message)
      }
      const checkOutcome = (tool: string, via: string, text: string, ok: boolean, body: any, wrote: ReadonlyArray<{ tbl: string; op: string }>) => {
        const where = `${tool} via ${via}, input ${text.length > 300 ? text.slice(0, 300) + `… (${text.length} chars)` : text}`
        if (ok) {
          const valid = validators.get(tool)!(body)
          if (!valid.valid) fail(`${where}: reply does not match the output schema: ${valid.errorMessage}`)
          dict.harvest(body)
          stats.ok++
          return
        }
        const code = body?.error?.code
        if (code === "internal_error" || !STABLE_CODES.has(code)) fail(`${where}: refusal without a stable code: ${JSON.stringify(body).slice(0, 500)}`)
        if (typeof body.error.message !== "string" || body.error.message.length === 0) fail(`${where}: refusal without a message`)
        if (!REFUSALS_THAT_RECORD.has(code) && wrote.length > 0) fail(`${where}: refused with ${code} but wrote ${JSON.stringify(wrote)}`)
        stats.refused++
        stats.byCode.set(code, (stats.byCode.get(code) ?? 0) + 1)
      }

      const started = performance.now()
      for (const tool of registry.tools) {
        const schema = registry.inputJsonSchema(tool)
        await fc.assert(
          fc.asyncProperty(inputArb(schema, dict), async ({ text }) => {
            const caller = callers[stats.inputs++ % callers.length]
            // the dispatcher, with what a transport's JSON.parse makes of the text
            let before = writes.count()
            const outcome = await runtime.runPromise(dispatcher.call(caller.caller, tool.name, JSON.parse(text)))
            stats.calls++
            checkOutcome(tool.name, "dispatcher", text, outcome.ok, outcome.body, writes.since(before))
            // the REST path, with the same text
            before = writes.count()
            const r = await fetch(`${http.baseUrl}/api/tools/${tool.name}`, {
              method: "POST",
              headers: { authorization: `Bearer ${caller.bearer}`, "content-type": "application/json" },
              body: text
            })
            const body = (await r.json()) as any
            stats.calls++
            if (r.status >= 500) fail(`${tool.name} via REST: HTTP ${r.status} ${JSON.stringify(body).slice(0, 300)}`)
            checkOutcome(tool.name, "REST", text, r.status === 200, body, writes.since(before))
          }),
          { numRuns: FUZZ_RUNS, seed: SEED, endOnFailure: true }
        )
      }
      const seconds = (performance.now() - started) / 1000
      const health = await fetch(`${http.baseUrl}/healthz`)
      assert.strictEqual(health.status, 200, "the server is alive")
      const verify = await runtime.runPromise(Effect.flatMap(Ledger, (l) => l.verify()))
      report("fuzz", {
        tools: registry.tools.length,
        inputs_per_tool: FUZZ_RUNS,
        inputs: stats.inputs,
        calls: stats.calls,
        ok: stats.ok,
        refused: stats.refused,
        watched_tables: writes.tables,
        seconds: seconds.toFixed(1),
        inputs_per_s: (stats.inputs / seconds).toFixed(0),
        calls_per_s: (stats.calls / seconds).toFixed(0),
        seed: SEED
      })
      report("fuzz refusals", Object.fromEntries([...stats.byCode].sort((a, b) => b[1] - a[1])))
      assert.deepStrictEqual(failures, [])
      assert.isTrue(verify.ok, JSON.stringify(verify))
      assert.isAbove(stats.ok, registry.tools.length, "some inputs succeed (the fuzz reaches the services)")
    } finally {
      raw.close()
      await runtime.dispose()
    }
  }, SOAK ? 7_200_000 : 600_000)
})
