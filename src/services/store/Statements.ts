import type { Statement } from "@effect/sql"
import { SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, FiberRef, Option } from "effect"

/**
 * A connection the store offers for single statements outside a transaction without taking the write
 * permit (the SQLite layer's WAL reader, which routes writes to the writer under the permit). Optional:
 * a store that does not provide it still works, through the ordinary statement path.
 */
export class DirectConnection extends Context.Tag("sophia/DirectConnection")<DirectConnection, Connection>() {}

/**
 * What the store offers to tell whether anything was committed since a moment: `current()` returns a
 * number that is the same at two moments only if no transaction committed between them, on any
 * connection of any process (the SQLite layer: its writer's own commits, counted, plus `PRAGMA
 * data_version`, which moves on every other connection's commit). Synchronous and a few µs, so a reader
 * can keep what it derived from the store while nothing moved. Optional: Postgres has no cheap
 * equivalent and does not provide it; readers then read the store every time.
 */
export class StoreVersion extends Context.Tag("sophia/StoreVersion")<StoreVersion, {
  readonly current: () => number
  /**
   * The version as far as this process knows without asking the store: its own commits are counted, other
   * connections' only as of the last `current()`. Never above `current()`, and free. A reader that finds
   * `known()` already past what it kept need not call `current()` (right after its own write, where the
   * store's check costs most: ~9 µs against 3–5 µs, measured); and `known()` is a safe stamp for what it
   * reads next, since a commit it has not counted yet makes the next `current()` larger, never equal.
   */
  readonly known: () => number
  /**
   * How many of this process's own commits so far were made under `EnvelopeNeutral` (counted in the same
   * synchronous step as the commit itself). `current() - neutral()` moves on every other commit: what a
   * reader of the envelope compares (services/readmodel/Envelope.ts).
   */
  readonly neutral: () => number
}>() {}

/**
 * Set (with `Effect.locally`) around a write transaction that changes nothing the envelope reads — no
 * post, no read mark, no wait's status or delivery: `_inbox_unread` and the waits' flags of every connection
 * stay what they were (services/Events.ts sets it for a `transaction` that says so, and clears it when the
 * write publishes an event it did not allow). A store that offers `StoreVersion` counts such a commit in
 * `neutral()`; nothing else changes.
 */
export const EnvelopeNeutral: FiberRef.FiberRef<boolean> = FiberRef.unsafeMake(false)

/** A value a statement binds. (No booleans: the SQLite driver binds none; write 1/0.) */
export type Param = string | number | bigint | null

/** The parameters of a statement of fixed shape: each by its name. */
export type Params = Readonly<Record<string, Param>>

/** The parameters of a statement whose shape depends only on the lengths of its lists (`IN (…)`, multi-row inserts). */
export type ShapedParams = Readonly<Record<string, Param | ReadonlyArray<Param> | ReadonlyArray<Readonly<Record<string, Param>>>>>

/** A named statement, ready to run with its parameters. */
export type Named<P, A> = (params: P) => Effect.Effect<ReadonlyArray<A>, SqlError>

/**
 * A placeholder stands for one parameter while a statement is compiled: a string no caller can write (it
 * holds a NUL), distinct for every parameter, so each value the compiler emits is traced back to the one
 * parameter it is — whatever values a first call would have brought (two equal values swapped on that
 * call cannot pass for each other).
 */
const MARK = "\u0000sophia:"
type Accessor = (params: any) => unknown

const failBuild = (name: string, why: string): never => {
  throw new Error(`statement ${name}: ${why}`)
}

/**
 * Compile `statement` (built over placeholders) and map each value it binds back to its parameter. A value
 * that is not a placeholder is a constant of the statement's text and bound as it is, unless it was
 * computed from a placeholder (a parameter must be bound as itself). Every parameter must be bound: one
 * that only changes the text (an identifier, a `sql.literal`) cannot be a parameter.
 */
const compileNamed = (name: string, statement: Statement.Statement<unknown>, placeholders: ReadonlyMap<string, Accessor>) => {
  const [text, values] = statement.compile()
  const used = new Set<string>()
  const accessors = values.map((value, i): Accessor => {
    if (typeof value === "string") {
      const accessor = placeholders.get(value)
      if (accessor !== undefined) {
        used.add(value)
        return accessor
      }
      if (value.toLowerCase().includes(MARK)) failBuild(name, `value ${i + 1} is computed from a parameter; bind the parameter itself`)
    }
    if (typeof value === "number" && Number.isNaN(value)) failBuild(name, `value ${i + 1} is NaN (computed from a parameter?)`)
    return () => value
  })
  for (const placeholder of placeholders.keys()) {
    if (!used.has(placeholder)) {
      failBuild(name, `parameter '${placeholder.slice(MARK.length)}' is never bound as a value (a parameter cannot change the statement's text)`)
    }
  }
  return { text, accessors }
}

const bind = (name: string, accessors: ReadonlyArray<Accessor>, params: unknown): ReadonlyArray<unknown> => {
  const out = new Array<unknown>(accessors.length)
  for (let i = 0; i < accessors.length; i++) {
    const value = accessors[i](params)
    if (value === undefined) throw new Error(`statement ${name}: a parameter is undefined (value ${i + 1})`)
    out[i] = value
  }
  return out
}

/**
 * Statements whose parameters are bound by name, for every statement of a fixed shape: its SQL is compiled
 * once, when the statement is made (by the client's own compiler, so the dialect's placeholders, whatever
 * the store), over placeholder values that name each parameter; a call binds its parameters by those
 * names and runs the text directly on the connection of the transaction it is in, or on the store's
 * `DirectConnection` outside one — without the per-statement span, scope, fiber-ref patching and compile
 * of `` sql`…` `` (measured: ~19 µs against ~2.5 µs per statement inside a transaction). Elsewhere (no
 * transaction, no direct connection: Postgres outside a transaction) the statement is built with the real
 * values and runs the ordinary way. Transaction semantics and the `SqlClient` seam are unchanged.
 *
 * A parameter may appear any number of times. Statements whose text changes with a value (a LIMIT, an
 * optional condition) are one named statement per text: `Statements.family` keeps them.
 */
export const makeStatements = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const direct = yield* Effect.serviceOption(DirectConnection)

  const runner = <Row>(
    execute: (connection: Connection, text: string, values: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>, SqlError>,
    ordinary: (statement: Statement.Statement<any>) => Effect.Effect<ReadonlyArray<Row>, SqlError>
  ) =>
  (text: string, values: () => ReadonlyArray<unknown>, built: () => Statement.Statement<any>) =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (tx) =>
      tx._tag === "Some"
        ? execute(tx.value[0], text, values())
        : Option.isSome(direct)
        ? execute(direct.value, text, values())
        : ordinary(built()))

  const rowsRunner = runner<any>((connection, text, values) => connection.execute(text, values, undefined), (s) => s)
  const valuesRunner = runner<ReadonlyArray<unknown>>((connection, text, values) => connection.executeValues(text, values), (s) => s.values)

  /** Compile now, over a placeholder per parameter the builder reads. */
  const fixedShape = <P extends Params, A>(name: string, build: (p: P) => Statement.Statement<A>) => {
    const placeholders = new Map<string, Accessor>()
    const proxy = new Proxy({}, {
      get: (_, key) => {
        if (typeof key !== "string") return undefined
        const placeholder = MARK + key
        if (!placeholders.has(placeholder)) placeholders.set(placeholder, (p) => p[key])
        return placeholder
      }
    }) as P
    return compileNamed(name, build(proxy) as Statement.Statement<unknown>, placeholders)
  }

  const named = <P extends Params = {}, A = any>(name: string, build: (p: P) => Statement.Statement<A>): Named<P, A> => {
    const { text, accessors } = fixedShape(name, build)
    return (params) => rowsRunner(text, () => bind(name, accessors, params), () => build(params)) as Effect.Effect<ReadonlyArray<A>, SqlError>
  }

  /**
   * The same, each row as an array of its values in the SELECT's column order: no object per row (reading
   * a long page of rows, the SQLite driver builds objects at ~1.6× the cost of arrays).
   */
  const namedValues = <P extends Params = {}>(name: string, build: (p: P) => Statement.Statement<any>): Named<P, ReadonlyArray<unknown>> => {
    const { text, accessors } = fixedShape(name, build)
    return (params) => valuesRunner(text, () => bind(name, accessors, params), () => build(params))
  }

  /**
   * A statement whose shape depends only on the lengths of its lists: compiled once per shape (the lists'
   * lengths), on its first use, over placeholders of that shape — named `list[i]`, or `rows[i].column` for a
   * list of rows. Up to `maxValues` bound values; longer ones are built and run the ordinary way.
   */
  const shaped = <P extends ShapedParams, A = any>(name: string, maxValues: number, build: (p: P) => Statement.Statement<A>): Named<P, A> => {
    const shapes = new Map<string, { readonly text: string; readonly accessors: ReadonlyArray<Accessor> }>()
    const compileShape = (params: P) => {
      const placeholderParams: Record<string, unknown> = {}
      const placeholders = new Map<string, Accessor>()
      const add = (placeholder: string, accessor: Accessor) => {
        placeholders.set(placeholder, accessor)
        return placeholder
      }
      for (const k of Object.keys(params)) {
        const value = params[k]
        placeholderParams[k] = !Array.isArray(value)
          ? add(MARK + k, (p) => p[k])
          : value.map((item: unknown, i: number) => {
            if (item === null || typeof item !== "object") return add(`${MARK}${k}[${i}]`, (p) => p[k][i])
            const row: Record<string, string> = {}
            for (const column of Object.keys(item)) row[column] = add(`${MARK}${k}[${i}].${column}`, (p) => p[k][i][column])
            return row
          })
      }
      return compileNamed(name, build(placeholderParams as P) as Statement.Statement<unknown>, placeholders)
    }
    return (params) => {
      let key = ""
      let size = 0
      for (const k in params) {
        const value = params[k]
        if (!Array.isArray(value)) {
          size++
          continue
        }
        key += `${k}:${value.length};`
        const first = value[0]
        size += value.length * (first !== null && typeof first === "object" ? Object.keys(first).length : 1)
      }
      if (size > maxValues) return build(params)
      let compiled = shapes.get(key)
      if (compiled === undefined) shapes.set(key, compiled = compileShape(params))
      const { text, accessors } = compiled
      return rowsRunner(text, () => bind(name, accessors, params), () => build(params)) as Effect.Effect<ReadonlyArray<A>, SqlError>
    }
  }

  return { named, namedValues, shaped } as const
})

/** What `makeStatements` gives a service: `named`, `namedValues` and `shaped` statements. */
export type Statements = Effect.Effect.Success<typeof makeStatements>

/**
 * One statement per key, made on first use and kept: for a statement whose text depends on a value the
 * code vouches for (a LIMIT written into the text by `limitTo`, an optional condition), each text is a
 * named statement of its own.
 */
export const family = <K, S>(make: (key: K) => S): ((key: K) => S) => {
  const made = new Map<K, S>()
  return (key) => {
    let statement = made.get(key)
    if (statement === undefined) made.set(key, statement = make(key))
    return statement
  }
}

/**
 * The one rule for LIMIT: its value is written into the statement's text, never bound (`LIMIT ${limitTo(sql, n)}`
 * or a constant `LIMIT 1`). SQLite plans a statement with its LIMIT's value in view, so binding a LIMIT
 * parameter expires the plan and the statement is compiled again on every run — measured on the inbox's
 * statements: the page 24 µs a run with `LIMIT ?` against 1.4 µs with `LIMIT 20` (empty page; 32 against
 * 8.7 µs for 20 rows), the channel list 46 against 21 µs. Each value is a statement text of its own, prepared
 * once and kept (a named statement per value: `family`). Only for a whole number the code vouches for (a
 * decoded, bounded input; a constant): anything else is a defect, never SQL text. test/Statements.test.ts
 * guards that no statement in src/ binds a LIMIT.
 */
export const limitTo = (sql: SqlClient.SqlClient, n: number): Statement.Fragment => {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`LIMIT takes a whole number ≥ 0; got ${n}`)
  return sql.literal(`LIMIT ${n}`)
}
