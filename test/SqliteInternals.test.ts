/**
 * The internals of @effect/sql the SQLite adapter relies on (src/layers/sqlite/Internals.ts): the installed
 * versions are the ones they were checked against, package.json pins the peers to exactly those, each
 * behaviour the adapter relies on still holds in the library, and only Internals.ts touches them.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { sqliteClient } from "../src/layers/Sql.js"
import { CHECKED_AGAINST } from "../src/layers/sqlite/Internals.js"

const require = createRequire(import.meta.url)
const installed = (name: string): string => JSON.parse(fs.readFileSync(require.resolve(`${name}/package.json`), "utf8")).version
const root = path.join(__dirname, "..")
const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"))

describe("the @effect/sql internals the SQLite adapter relies on", () => {
  it("the installed @effect/sql and effect are the versions Internals.ts was checked against", () => {
    for (const [name, version] of Object.entries(CHECKED_AGAINST)) {
      assert.strictEqual(installed(name), version, `${name} ${installed(name)} is installed; src/layers/sqlite/Internals.ts was checked against ${version}: re-check it, then update CHECKED_AGAINST`)
    }
  })

  it("package.json pins those peers exactly, to the versions it develops against", () => {
    for (const [name, version] of Object.entries(CHECKED_AGAINST)) {
      assert.strictEqual(pkg.peerDependencies[name], version, `peerDependencies.${name}`)
      assert.strictEqual(pkg.devDependencies[name], version, `devDependencies.${name}`)
    }
  })

  /** A client made by the library itself over a connection that records what it is asked to run. */
  const recordingClient = (ran: Array<string>) => {
    const connection: Connection = {
      execute: (sql) => Effect.sync(() => (ran.push(sql), [])),
      executeRaw: (sql) => Effect.sync(() => (ran.push(sql), [])),
      executeValues: (sql) => Effect.sync(() => (ran.push(sql), [])),
      executeUnprepared: (sql) => Effect.sync(() => (ran.push(sql), [])),
      executeStream: () => Effect.dieMessage("not here") as any
    }
    return {
      connection,
      make: SqlClient.make({ acquirer: Effect.succeed(connection), compiler: Statement.makeCompilerSqlite(), spanAttributes: [] }).pipe(
        Effect.provide(Reactivity.layer)
      )
    }
  }

  it.effect("(1, 3) the library's transaction puts [connection, depth] in the context; a nested one is a savepoint on it", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const { connection, make } = recordingClient(ran)
      const sql = yield* make
      const seen = yield* sql.withTransaction(Effect.gen(function*() {
        const outer = yield* Effect.serviceOption(SqlClient.TransactionConnection)
        const inner = yield* sql.withTransaction(Effect.serviceOption(SqlClient.TransactionConnection))
        yield* sql`SELECT 1`
        return { outer, inner }
      }))
      assert.isTrue(Option.isSome(seen.outer) && seen.outer.value[0] === connection && seen.outer.value[1] === 0)
      assert.isTrue(Option.isSome(seen.inner) && seen.inner.value[0] === connection && seen.inner.value[1] === 1)
      assert.deepStrictEqual(ran, ["BEGIN", "SAVEPOINT effect_sql_1", "SELECT 1", "COMMIT"])
    }))

  it.effect("(2) the client is its own `safe` and its own `withoutTransforms()`; `withTransaction` is an own property", () =>
    Effect.gen(function*() {
      const sql = yield* recordingClient([]).make
      assert.strictEqual(sql.safe, sql)
      assert.strictEqual(sql.withoutTransforms(), sql)
      assert.isTrue(Object.prototype.hasOwnProperty.call(sql, "withTransaction"))
    }))

  it.effect("the adapter's outermost transaction leaves the context as the library would: nested savepoints on the writer", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      assert.strictEqual(sql.safe.withTransaction, sql.withTransaction, "the replacement is what `safe` carries too")
      yield* sql`CREATE TABLE t (n INTEGER NOT NULL)`
      let inner: Option.Option<readonly [Connection, number]> = Option.none()
      const outer = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO t (n) VALUES (1)`
        // a nested transaction that fails rolls back to its savepoint only
        const failed = yield* Effect.exit(sql.withTransaction(Effect.gen(function*() {
          inner = yield* Effect.serviceOption(SqlClient.TransactionConnection)
          yield* sql`INSERT INTO t (n) VALUES (2)`
          return yield* Effect.fail("undo the nested transaction")
        })))
        assert.strictEqual(failed._tag, "Failure")
        return yield* Effect.serviceOption(SqlClient.TransactionConnection)
      }))
      assert.isTrue(Option.isSome(outer) && outer.value[1] === 0)
      assert.isTrue(Option.isSome(inner) && Option.isSome(outer) && inner.value[0] === outer.value[0] && inner.value[1] === 1)
      assert.deepStrictEqual((yield* sql<{ n: number }>`SELECT n FROM t`).map((r) => r.n), [1])
    }).pipe(Effect.provide(Layer.orDie(sqliteClient({ filename: ":memory:" })))))

  it("only Internals.ts touches them, in src/layers", () => {
    const files = (dir: string): Array<string> =>
      fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)])
    const layers = path.join(root, "src", "layers")
    const offenders = files(layers)
      .filter((f) => f !== path.join(layers, "sqlite", "Internals.ts"))
      .flatMap((f) =>
        fs.readFileSync(f, "utf8").split("\n")
          .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line))
          .filter((line) => /TransactionConnection|unsafeMap|\.safe\b|Object\.assign\(/.test(line))
          .map((line) => `${path.relative(root, f)}: ${line.trim()}`)
      )
    assert.deepStrictEqual(offenders, [])
  })
})
