import { Effect } from "effect"
import type { Caller, Profile } from "../../src/domain/Auth.js"
import { Auth } from "../../src/services/Auth.js"

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
