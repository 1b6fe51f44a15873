/**
 * The statement helpers every service shares (src/services/store/Statements.ts; the named statements themselves are NamedStatements.test.ts) that are not about routing or
 * transactions (those are in SqliteStore.io.test.ts).
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SophiaTest } from "../src/layers/App.js"
import { limitTo } from "../src/services/store/Statements.js"

describe("limitTo", () => {
  it.effect("writes the LIMIT into the statement's text, never as a bound parameter (SQLite re-plans a bound LIMIT on every run)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [text, params] = sql`SELECT n FROM t WHERE a = ${"x"} ${limitTo(sql, 20)}`.compile()
      assert.match(text, /LIMIT 20$/)
      assert.deepStrictEqual(params, ["x"])
      // and the store honours it
      yield* sql`CREATE TABLE t (n INTEGER NOT NULL)`
      for (let i = 0; i < 5; i++) yield* sql`INSERT INTO t (n) VALUES (${i})`
      const rows = yield* sql<{ n: number }>`SELECT n FROM t ORDER BY n ${limitTo(sql, 3)}`
      assert.deepStrictEqual(rows.map((r) => r.n), [0, 1, 2])
      assert.strictEqual((yield* sql`SELECT n FROM t ${limitTo(sql, 0)}`).length, 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("refuses anything but a whole number ≥ 0: it is SQL text, never a value from outside", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      for (const bad of [2.5, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60, "5; DROP TABLE t" as unknown as number]) {
        assert.throws(() => limitTo(sql, bad), RangeError)
      }
    }).pipe(Effect.provide(SophiaTest)))
})
