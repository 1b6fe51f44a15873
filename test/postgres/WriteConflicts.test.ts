/**
 * A Postgres serialization failure or deadlock rolls a transaction back; the store runs the outermost
 * transaction again (services/store/Conflicts.ts) and, when every attempt conflicted, the call is refused
 * `busy` — never `internal_error`. Conflicts are forced with `RAISE … USING ERRCODE`, exactly what
 * Postgres reports for a real one. Runs in the vitest `postgres` project only (a fresh schema per test).
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Ref, Schema } from "effect"
import { makeCore } from "../../src/layers/App.js"
import { TestStore } from "../../src/layers/Sql.js"
import { Dispatcher } from "../../src/mcp/Dispatch.js"
import { defineTool, ToolRegistry } from "../../src/mcp/Registry.js"
import type { ToolSet } from "../../src/mcp/Registry.js"
import { DEFAULT_CONFLICT_RETRY } from "../../src/services/store/Conflicts.js"
import { connect } from "../support/Fixtures.js"

const raise = (code: string) => `DO $$ BEGIN RAISE EXCEPTION 'forced conflict' USING ERRCODE = '${code}'; END $$`

/** A tool whose one transaction writes a row, then conflicts on its first `conflicts` attempts. */
const conflictingTools = (attempts: Ref.Ref<number>, conflicts: number, code: string): ToolSet<SqlClient.SqlClient> =>
  Effect.map(SqlClient.SqlClient, (sql) => [
    defineTool({
      name: "sophia.test_conflict",
      group: "test",
      access: "write",
      description: "test only",
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
      input: Schema.Struct({}),
      output: Schema.Struct({ attempts: Schema.Number }),
      handler: () =>
        sql.withTransaction(Effect.gen(function*() {
          const n = yield* Ref.updateAndGet(attempts, (x) => x + 1)
          yield* sql`INSERT INTO conflict_probe (attempt) VALUES (${n})`
          if (n <= conflicts) yield* sql.unsafe(raise(code))
          return { attempts: n }
        })).pipe(Effect.orDie)
    })
  ])

const appWith = (attempts: Ref.Ref<number>, conflicts: number, code = "40001") =>
  makeCore(
    TestStore,
    ToolRegistry.fromToolSets(conflictingTools(attempts, conflicts, code)) as unknown as Parameters<typeof makeCore>[1]
  )

const run = (conflicts: number, code?: string) =>
  Effect.gen(function*() {
    const attempts = yield* Ref.make(0)
    return yield* Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE conflict_probe (attempt INTEGER NOT NULL)`
      const { caller } = yield* connect("writer", "full")
      const dispatcher = yield* Dispatcher
      const outcome = yield* dispatcher.call(caller, "sophia.test_conflict", {})
      const rows = yield* sql<{ attempt: number }>`SELECT attempt FROM conflict_probe`
      return { outcome, rows: rows.map((r) => r.attempt), attempts: yield* Ref.get(attempts) }
    }).pipe(Effect.provide(appWith(attempts, conflicts, code)))
  })

describe("write conflicts on Postgres", () => {
  it.live("a serialization failure is retried: the third attempt commits, once", () =>
    Effect.gen(function*() {
      const { attempts, outcome, rows } = yield* run(2)
      assert.isTrue(outcome.ok, JSON.stringify(outcome.body))
      assert.strictEqual(attempts, 3)
      assert.deepStrictEqual(rows, [3], "the rolled-back attempts left nothing")
    }))

  it.live("a deadlock is retried the same way", () =>
    Effect.gen(function*() {
      const { attempts, outcome } = yield* run(1, "40P01")
      assert.isTrue(outcome.ok, JSON.stringify(outcome.body))
      assert.strictEqual(attempts, 2)
    }))

  it.live("a conflict on every attempt is refused `busy` (bounded attempts, nothing written), never internal_error", () =>
    Effect.gen(function*() {
      const { attempts, outcome, rows } = yield* run(1000)
      assert.isFalse(outcome.ok)
      const error = (outcome.body as { error: { code: string; attempts: number; retry_after_s: number; message: string } }).error
      assert.strictEqual(error.code, "busy")
      assert.strictEqual(attempts, DEFAULT_CONFLICT_RETRY.attempts)
      assert.strictEqual(error.attempts, DEFAULT_CONFLICT_RETRY.attempts)
      assert.isAbove(error.retry_after_s, 0)
      assert.include(error.message, "nothing was written")
      assert.deepStrictEqual(rows, [])
    }))
})
