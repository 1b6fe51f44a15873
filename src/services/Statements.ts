import type { Statement } from "@effect/sql"
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Option } from "effect"

import { DirectConnection } from "./store/Statements.js"

/** Retiring: every statement becomes a named one (`store/Statements.ts`); this file goes once none is left. */
export { DirectConnection, limitTo, StoreVersion } from "./store/Statements.js"

type Param = string | number | bigint | boolean | null

/**
 * Fixed statements for the hottest paths (a post, an append, marking reads, the envelope's probes,
 * a bearer's lookup): a statement's SQL is compiled once by the client's own compiler (so the dialect's
 * placeholders, whatever the store), then run directly on the connection of the transaction it is in,
 * or on the store's `DirectConnection` outside one — without the per-statement span, scope, fiber-ref
 * patching and compile of `` sql`…` `` (measured: ~19 µs against ~2.5 µs per statement inside a
 * transaction). Transaction semantics and the `SqlClient` seam are unchanged. Only statements whose
 * shape never changes (no `sql.in`, no optional fragments, each parameter once) belong here; tool-level
 * and service spans stay.
 */
export const makeFixedStatements = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const direct = yield* Effect.serviceOption(DirectConnection)
  const fixedIn = <Row>(
    run: (connection: Connection, sqlText: string, params: ReadonlyArray<Param>) => Effect.Effect<ReadonlyArray<Row>, SqlError>,
    ordinary: (statement: Statement.Statement<any>) => Effect.Effect<ReadonlyArray<Row>, SqlError>
  ) =>
  <P extends ReadonlyArray<Param>>(build: (...params: P) => Statement.Statement<any>) => {
    let text: string | undefined
    let fast = true
    return (...params: P): Effect.Effect<ReadonlyArray<Row>, SqlError> => {
      if (!fast) return ordinary(build(...params))
      if (text === undefined) {
        const [compiled, values] = build(...params).compile()
        // the fast path is only sound when the compiled parameters are exactly ours, in order
        fast = values.length === params.length && values.every((v, i) => v === params[i])
        text = compiled
        if (!fast) return ordinary(build(...params))
      }
      const sqlText = text
      return Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (tx) =>
        tx._tag === "Some"
          ? run(tx.value[0], sqlText, params)
          : Option.isSome(direct)
          ? run(direct.value, sqlText, params)
          : ordinary(build(...params)))
    }
  }
  const rows = fixedIn<any>(
    (connection, sqlText, params) => connection.execute(sqlText, params, undefined),
    (statement) => statement
  )
  return Object.assign(
    <P extends ReadonlyArray<Param>, A = any>(build: (...params: P) => Statement.Statement<A>) =>
      rows(build) as (...params: P) => Effect.Effect<ReadonlyArray<A>, SqlError>,
    {
      /**
       * The same, returning each row as an array of its values in the SELECT's column order: no object
       * per row (reading a long page of rows, the SQLite driver builds objects at ~1.6× the cost of arrays).
       */
      values: fixedIn<ReadonlyArray<unknown>>(
        (connection, sqlText, params) => connection.executeValues(sqlText, params),
        (statement) => statement.values
      )
    }
  )
})

/** What `makeFixedStatements` gives: a fixed statement from its builder. */
export type FixedStatements = Effect.Effect.Success<typeof makeFixedStatements>

/**
 * Fixed statements for a statement whose shape depends only on how many parameters it takes (an `IN` list,
 * a multi-row insert): one per count, made on first use, up to `maxParams` parameters; longer ones go the
 * ordinary way. The same soundness check as `fixed` applies to each.
 */
export const perCount = <A = any>(
  fixed: FixedStatements,
  maxParams: number,
  build: (...params: Array<Param>) => Statement.Statement<A>
) => {
  const statements = new Map<number, (...params: Array<Param>) => Effect.Effect<ReadonlyArray<A>, SqlError>>()
  return (...params: Array<Param>): Effect.Effect<ReadonlyArray<A>, SqlError> => {
    if (params.length > maxParams) return build(...params)
    let statement = statements.get(params.length)
    if (statement === undefined) statements.set(params.length, statement = fixed<Array<Param>, A>(build))
    return statement(...params)
  }
}

/**
 * A multi-row insert's rows from a `perCount` statement's flat parameters: `columns.length` values a row,
 * in the columns' order (`sql.insert` then compiles them back in that order, as the fixed path requires).
 */
export const rowsOf = (columns: ReadonlyArray<string>, flat: ReadonlyArray<Param>) => {
  const rows: Array<Record<string, Param>> = []
  for (let i = 0; i < flat.length; i += columns.length) {
    const row: Record<string, Param> = {}
    for (let c = 0; c < columns.length; c++) row[columns[c]] = flat[i + c]
    rows.push(row)
  }
  return rows
}
