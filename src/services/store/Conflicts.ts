/**
 * Write conflicts the store resolves by running the transaction again: a Postgres serialization failure
 * (SQLSTATE 40001) or deadlock (40P01) rolls the whole transaction back, and the same transaction run
 * again usually commits. The outermost transaction is retried a bounded number of times with a jittered
 * backoff (`retryingTransactions`, installed by the Postgres store); when every attempt conflicted, the
 * conflict reaches the caller and the Dispatcher answers `busy` (`isWriteConflict`), never
 * `internal_error`. A nested transaction (a savepoint) is never retried alone: the conflict aborted the
 * enclosing one. SQLite's single writer has no such conflict.
 */
import * as Client from "@effect/sql/SqlClient"
import { Duration, Effect, Option, Schedule } from "effect"

const CONFLICT_CODES: ReadonlySet<string> = new Set(["40001", "40P01"])

/** Whether `u` (an error, a defect, a SqlError and its causes) is a write conflict worth running again. */
export const isWriteConflict = (u: unknown): boolean => {
  for (let e: unknown = u, depth = 0; typeof e === "object" && e !== null && depth < 8; depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === "string" && CONFLICT_CODES.has(code)) return true
    e = (e as { cause?: unknown }).cause
  }
  return false
}

export interface ConflictRetry {
  /** attempts in all, the first included (default 5) */
  readonly attempts: number
  /** the first backoff; each next one doubles, jittered (default 5 ms) */
  readonly baseDelay: Duration.DurationInput
}

export const DEFAULT_CONFLICT_RETRY: ConflictRetry = { attempts: 5, baseDelay: "5 millis" }

/** `withTransaction` whose outermost transactions run again on a write conflict (see the module comment). */
export const retryingTransactions = (
  library: Client.SqlClient["withTransaction"],
  retry: ConflictRetry = DEFAULT_CONFLICT_RETRY
): Client.SqlClient["withTransaction"] =>
<R, E, A>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.serviceOption(Client.TransactionConnection), (outer) =>
    Option.isSome(outer)
      ? library(effect)
      : library(effect).pipe(
        Effect.retry({
          while: isWriteConflict,
          schedule: Schedule.exponential(retry.baseDelay).pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(retry.attempts - 1)))
        })
      ))
