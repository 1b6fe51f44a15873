/** `sophia backup`: SQLite's online backup of the file, no service built. */
import { Effect } from "effect"
import { backupSqlite } from "../layers/Commands.js"
import type { Globals } from "./Store.js"
import { CliFailure, existingStoreOf, printJson } from "./Store.js"

export const backup = (o: Globals & { readonly out: string }) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    if ("url" in store) {
      return yield* new CliFailure({ message: "backup copies a SQLite file; for Postgres use pg_dump" })
    }
    yield* printJson(yield* backupSqlite(store.filename, o.out))
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
