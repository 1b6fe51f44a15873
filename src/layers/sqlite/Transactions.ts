import type * as Client from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit, FiberRef, Scope } from "effect"
import { EnvelopeNeutral } from "../../services/store/Statements.js"
import { inTransaction, outermostTransaction } from "./Internals.js"
import type { Permit } from "./Permit.js"

/**
 * The write path of a SQLite store: who may write, and how a write transaction runs.
 *
 * The write permit is held until the transaction's (or the statement's) scope closes, so nothing runs
 * inside another fiber's open transaction. It goes to waiters in arrival order (see ./Permit.ts). Waiting
 * for it is interruptible (a long poll or a client that went away stops queueing); once taken, its release
 * is registered before anything can interrupt. The taker then waits for a WAL reset if one is due
 * (`catchUp`: see `checkpointsOffLoop` in ./Checkpoints.ts).
 */
export const makeWritePath = (
  writer: Connection,
  permit: Permit,
  catchUp: Effect.Effect<void> | undefined,
  /** told, right before an outermost COMMIT, whether that commit is envelope-neutral (`EnvelopeNeutral`) */
  neutralNext: (neutral: boolean) => void
) => {
  /** Take the permit for the current scope. */
  const takePermit: Effect.Effect<void, never, Scope.Scope> = Effect.uninterruptibleMask((restore) =>
    Effect.zipRight(
      restore(permit.take),
      Effect.flatMap(Effect.scope, (scope) => {
        const registered = Scope.addFinalizer(scope, permit.release)
        return catchUp === undefined ? registered : Effect.zipRight(registered, restore(catchUp))
      })
    )
  )
  return {
    takePermit,
    /** The writer connection, under the permit for the scope: the library's `transactionAcquirer`. */
    transactionAcquirer: Effect.as(takePermit, writer),
    withTransaction: (library: Client.SqlClient["withTransaction"]) => leanTransactions(library, writer, permit, catchUp, neutralNext)
  }
}

/**
 * The outermost write transaction without @effect/sql's per-transaction machinery: its
 * `SqlClient.withTransaction` opens a span (a no-op one when tracing is off), makes and extends a scope for
 * the permit, and runs BEGIN and COMMIT through the effectful statement path — measured ~65 µs around a
 * ~34 µs raw BEGIN / INSERT / COMMIT, on every post, append and marking read. Here: take the permit
 * (interruptibly, in arrival order), wait for a due WAL reset, BEGIN IMMEDIATE, run the effect with the
 * transaction's connection in its context (`TransactionConnection`, as the library sets it, so nested
 * transactions and named statements see it: ./Internals.ts), COMMIT on success or ROLLBACK on any failure
 * or interruption, release the permit — the same semantics on the same connection. A failed COMMIT or
 * ROLLBACK is a defect, as in the library; a failed BEGIN (the lock not had within `busy_timeout`) fails
 * the transaction with its `SqlError`, where the library would first try a ROLLBACK, fail that too and
 * die. No `sql.transaction` span: when tracing is on, the statements' spans sit under the service's and
 * the tool's spans (issue 16: hot internal paths untraced, tool-level spans kept). Nested transactions
 * (savepoints) keep the library's path.
 */
const leanTransactions = (
  library: Client.SqlClient["withTransaction"],
  writer: Connection,
  permit: Permit,
  catchUp: Effect.Effect<void> | undefined,
  neutralNext: (neutral: boolean) => void
): Client.SqlClient["withTransaction"] => {
  // (the writer connection's own statement path, as the library's BEGIN and COMMIT take it)
  const statement = (sql: string): Effect.Effect<void, SqlError> => Effect.asVoid(writer.executeRaw(sql, []))
  const begin = statement("BEGIN IMMEDIATE")
  // the store counts the COMMIT as envelope-neutral when the transaction ran under `EnvelopeNeutral` (told
  // in the step before it, under the permit: no other commit on the writer comes between)
  const commit = Effect.orDie(Effect.zipRight(
    Effect.flatMap(FiberRef.get(EnvelopeNeutral), (neutral) => Effect.sync(() => neutralNext(neutral))),
    Effect.ensuring(statement("COMMIT"), Effect.sync(() => neutralNext(false)))
  ))
  const rollback = Effect.orDie(statement("ROLLBACK"))
  return <R, E, A>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    Effect.withFiberRuntime<A, E | SqlError, R>((fiber) => {
      const context = fiber.currentContext
      if (inTransaction(context)) return library(effect)
      const inside = outermostTransaction(context, writer)
      return Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          restore(permit.take),
          Effect.ensuring(
            Effect.zipRight(
              catchUp === undefined ? begin : Effect.zipRight(restore(catchUp), begin),
              Effect.flatMap(
                Effect.exit(Effect.locally(restore(effect), FiberRef.currentContext, inside)),
                (exit) => Effect.zipRight(Exit.isSuccess(exit) ? commit : rollback, exit)
              )
            ),
            permit.release
          )
        )
      )
    })
}
