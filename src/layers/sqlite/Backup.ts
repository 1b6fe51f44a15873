import { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import * as fs from "node:fs"
import { open } from "./Connection.js"

/**
 * An online, consistent copy of the SQLite database `source` into the new file `target` through SQLite's
 * backup API, taken in one step (so the copy is one snapshot even while a daemon keeps writing), made the
 * owner's alone like the database itself. Fails as a `SqlError` whose message says which step failed and
 * whose cause is the driver's error.
 */
export const backup = (source: string, target: string) =>
  Effect.gen(function*() {
    const db = yield* open(source, { readonly: true, fileMustExist: true, timeout: 5000 }).pipe(
      Effect.mapError((e) => new SqlError({ cause: e.cause, message: `cannot open the database ${source}` }))
    )
    yield* Effect.tryPromise({
      // (one step: as many pages as there are)
      try: () => db.backup(target, { progress: () => 0x7fffffff }),
      catch: (cause) => new SqlError({ cause, message: `backup of ${source} to ${target} failed` })
    })
    yield* Effect.sync(() => fs.chmodSync(target, 0o600))
    return { source, out: target, bytes: fs.statSync(target).size }
  }).pipe(Effect.scoped)
