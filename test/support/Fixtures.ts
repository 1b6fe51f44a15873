import { ConfigProvider, Effect, Layer } from "effect"
import type { Caller, Profile } from "../../src/domain/Auth.js"
import { SophiaLive } from "../../src/layers/App.js"
import { Auth } from "../../src/services/Auth.js"

/**
 * The app on a SQLite file with the background search indexer's pause set (`SOPHIA_SEARCH_INDEX_DELAY_MS`):
 * long, it stays out of the way (its batches are this process's commits) and only searches index; short,
 * it does its work.
 */
export const appOnFile = (db: string, searchIndexDelayMs: number) =>
  SophiaLive(db).pipe(
    Layer.provide(
      Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["SOPHIA_SEARCH_INDEX_DELAY_MS", String(searchIndexDelayMs)]])))
    )
  )

/**
 * Mint a connection through the real Auth service and authenticate its bearer, as a transport would.
 * Returns the Caller a tool call would run as, plus the bearer.
 */
export const connect = (name: string, profile: Profile = "full", user?: string, scope?: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const auth = yield* Auth
    const minted = yield* auth.createConnection({ name, profile, user, scope })
    const caller = yield* Effect.orDie(auth.authenticate(minted.bearer))
    return { caller, bearer: minted.bearer } as { caller: Caller; bearer: string }
  })
