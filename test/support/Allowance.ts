import { Effect } from "effect"
import type { Caller, Profile } from "../../src/domain/Auth.js"
import { Auth } from "../../src/services/Auth.js"

/**
 * `connect` (Fixtures.ts) for a connection the owner minted with the elicitation allowance: its own MCP
 * client's answer may approve its plain writes (never an elevated call).
 */
export const connectAllowingElicitation = (name: string, profile: Profile = "assistant") =>
  Effect.gen(function*() {
    const auth = yield* Auth
    const minted = yield* auth.createConnection({ name, profile, allowElicitation: true })
    const caller = yield* Effect.orDie(auth.authenticate(minted.bearer))
    return { caller, bearer: minted.bearer } as { caller: Caller; bearer: string }
  })
