/**
 * Named statements (src/services/store/Statements.ts), on both stores: each parameter is bound by its name,
 * whatever values the first call brought, inside a transaction (the direct path), outside one (the store's
 * direct connection on SQLite, the ordinary path on Postgres), and refused when it is made if a parameter
 * could not be bound as itself.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { SophiaTest } from "../src/layers/App.js"
import { makeStatements } from "../src/services/store/Statements.js"

const table = Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE named_t (k TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL, n INTEGER NOT NULL)`)

describe("named statements", () => {
  it.effect("two parameters of equal value on the first call, then unequal ones: each binds by its name (in and out of a transaction)", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { named } = yield* makeStatements
      yield* table
      // b is written before a in the text: a positional binding of (a, b) would swap them
      const insert = named("test.insert", (p: { k: string; a: string; b: string; n: number }) =>
        sql`INSERT INTO named_t (k, b, a, n) VALUES (${p.k}, ${p.b}, ${p.a}, ${p.n})`)
      const select = named("test.select", (p: { k: string }) => sql`SELECT a, b, n FROM named_t WHERE k = ${p.k}`)
      yield* sql.withTransaction(insert({ k: "first", a: "same", b: "same", n: 1 }))
      yield* sql.withTransaction(insert({ k: "second", a: "A", b: "B", n: 2 }))
      yield* insert({ k: "third", a: "A3", b: "B3", n: 3 })
      assert.deepStrictEqual([...yield* select({ k: "second" })].map((r) => [r.a, r.b, Number(r.n)]), [["A", "B", 2]])
      assert.deepStrictEqual([...yield* sql.withTransaction(select({ k: "third" }))].map((r) => [r.a, r.b, Number(r.n)]), [["A3", "B3", 3]])
      assert.deepStrictEqual([...yield* select({ k: "first" })].map((r) => [r.a, r.b]), [["same", "same"]])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a parameter used several times binds the same value everywhere; constants stay constants", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { named, namedValues } = yield* makeStatements
      yield* table
      const insert = named("test.twice", (p: { k: string; v: string }) =>
        sql`INSERT INTO named_t (k, a, b, n) VALUES (${p.k}, ${p.v}, ${p.v}, ${7})`)
      yield* sql.withTransaction(insert({ k: "x", v: "one" }))
      yield* insert({ k: "y", v: "two" })
      const pick = namedValues("test.values", (p: { v: string }) =>
        sql`SELECT k, n FROM named_t WHERE a = ${p.v} AND b = ${p.v} ORDER BY k`)
      assert.deepStrictEqual((yield* pick({ v: "two" })).map(([k, n]) => [k, Number(n)]), [["y", 7]])
      assert.deepStrictEqual((yield* sql.withTransaction(pick({ v: "one" }))).map(([k, n]) => [k, Number(n)]), [["x", 7]])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("shaped: lists and rows bind by name and position in the list, per length; equal values on the first call", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { shaped } = yield* makeStatements
      yield* table
      const insertRows = shaped("test.rows", 64, (p: { rows: ReadonlyArray<{ k: string; a: string; b: string; n: number }> }) =>
        sql`INSERT INTO named_t ${sql.insert(p.rows as any)}`)
      yield* sql.withTransaction(insertRows({ rows: [{ k: "r1", a: "z", b: "z", n: 1 }, { k: "r2", a: "z", b: "z", n: 1 }] }))
      yield* sql.withTransaction(insertRows({ rows: [{ k: "r3", a: "a3", b: "b3", n: 3 }, { k: "r4", a: "a4", b: "b4", n: 4 }] }))
      const byKeys = shaped("test.in", 64, (p: { n: number; keys: ReadonlyArray<string> }) =>
        sql`SELECT k, a, b FROM named_t WHERE n >= ${p.n} AND ${sql.in("k", p.keys)} ORDER BY k`)
      assert.deepStrictEqual((yield* sql.withTransaction(byKeys({ n: 1, keys: ["r1", "r1"] }))).map((r) => r.k), ["r1"])
      assert.deepStrictEqual(
        (yield* sql.withTransaction(byKeys({ n: 3, keys: ["r4", "r3"] }))).map((r) => [r.k, r.a, r.b]),
        [["r3", "a3", "b3"], ["r4", "a4", "b4"]]
      )
      // longer than its bound: built and run the ordinary way, same answer
      const few = shaped("test.few", 2, (p: { keys: ReadonlyArray<string> }) => sql`SELECT k FROM named_t WHERE ${sql.in("k", p.keys)} ORDER BY k`)
      assert.deepStrictEqual((yield* few({ keys: ["r2", "r3", "r4"] })).map((r) => r.k), ["r2", "r3", "r4"])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("refused when made: a parameter that changes the text, a value computed from a parameter", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { named } = yield* makeStatements
      assert.throws(() => named("test.literal", (p: { t: string }) => sql`SELECT 1 FROM ${sql(p.t)}`), /parameter 't' is never bound/)
      assert.throws(() => named("test.derived", (p: { t: string }) => sql`SELECT ${p.t.toUpperCase()} AS x`), /computed from a parameter/)
      assert.throws(() => named("test.number", (p: { n: number }) => sql`SELECT ${Number(p.n) + 1} AS x`), /NaN/)
    }).pipe(Effect.provide(SophiaTest)))
})

describe("the LIMIT rule", () => {
  const files = (dir: string): Array<string> =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)])

  it("no statement in src/ binds a LIMIT: each is a constant or written by limitTo", () => {
    const src = path.join(__dirname, "..", "src")
    const offenders = files(src).filter((f) => f.endsWith(".ts")).flatMap((f) =>
      fs.readFileSync(f, "utf8").split("\n").map((line, i) => ({ f, i, line }))
        // (limitTo itself writes the number it checked as text: `sql.literal(`LIMIT ${n}`)`)
        .filter(({ line }) => /\b(LIMIT|OFFSET)\s+\$\{(?!limitTo\()/.test(line) && !line.includes("sql.literal("))
        .map(({ f, i, line }) => `${path.relative(src, f)}:${i + 1}: ${line.trim()}`)
    )
    assert.deepStrictEqual(offenders, [])
  })
})
