/**
 * What every command shares: the expected failure (`sophia: <message>`, exit 1), the store the global
 * flags name, and its JSON output. (What each runs on is its own module's: layers/Commands.ts.)
 */
import { Config, Console, Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { StoreChoice } from "../layers/Commands.js"

/** An expected CLI failure: printed as `sophia: <message>`, exit 1. */
export class CliFailure extends Schema.TaggedError<CliFailure>()("CliFailure", { message: Schema.String }) {}

/** The global flags as every handler reads them. */
export interface Globals {
  readonly db: string
  readonly databaseUrl: string | undefined
}

/** The store: `--database-url`, else env SOPHIA_DATABASE_URL, else the SQLite file `--db`. */
export const storeOf = (g: Globals) =>
  Effect.gen(function*() {
    const env = yield* Config.option(Config.string("SOPHIA_DATABASE_URL")).pipe(Effect.orDie)
    const url = Option.orElse(Option.fromNullable(g.databaseUrl), () => env).pipe(Option.filter((u) => u.trim() !== ""))
    return Option.match(url, {
      onNone: (): StoreChoice => ({ filename: path.resolve(g.db) }),
      onSome: (u): StoreChoice => ({ url: u })
    })
  })

/** For commands that only read or change an existing graph: refuse a missing database, create nothing. */
export const existingStoreOf = (g: Globals): Effect.Effect<StoreChoice, CliFailure> =>
  Effect.flatMap(storeOf(g), (store): Effect.Effect<StoreChoice, CliFailure> => {
    if ("url" in store) return Effect.succeed(store)
    if (!fs.existsSync(store.filename)) {
      return Effect.fail(
        new CliFailure({
          message: `no database at ${store.filename} (nothing was created); pass --db with the path the daemon uses`
        })
      )
    }
    if (fs.statSync(store.filename).isDirectory()) {
      return Effect.fail(new CliFailure({ message: `${store.filename} is a directory, not a database file` }))
    }
    return Effect.succeed(store)
  })

/** A command's machine-readable result: one JSON line on stdout. */
export const printJson = (value: unknown) => Console.log(JSON.stringify(value))
