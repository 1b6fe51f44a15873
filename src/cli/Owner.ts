/**
 * `approvals approve|deny`: on every service that keeps the graph and every subscriber that writes
 * (layers/Services.ts), as a daemon's decision would. Each prints its result as one JSON line.
 */
import { Effect } from "effect"
import type { StoreChoice } from "../layers/Services.js"
import { CommandServicesOn } from "../layers/Services.js"
import { Approvals } from "../services/Approvals.js"
import type { Globals } from "./Store.js"
import { existingStoreOf, printJson } from "./Store.js"

/** Run `effect` on the whole graph over the store (typed refusals and store failures reach the reporter). */
const withServices = <A, E>(store: StoreChoice, effect: Effect.Effect<A, E, Approvals>) =>
  Effect.provide(effect, CommandServicesOn(store))

export const approvalsDecide = (decision: "approved" | "denied") => (o: Globals & { readonly approvalId: string }) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, Effect.flatMap(Approvals, (a) => a.decide(o.approvalId, decision))).pipe(
      Effect.flatMap(printJson)
    ))

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
