/**
 * `connection revoke`: a revocation reaches most of the graph — the connection's waits end and resolve, the
 * ledger observes its claims, the owner is notified — so it runs with every subscriber that writes
 * (`everySubscriber`, layers/Wiring.ts) over every service they ask; not Approvals, which none of them asks
 * (layers/Commands.ts).
 */
import { Effect, Layer } from "effect"
import { commandOn } from "../layers/Commands.js"
import { everySubscriber } from "../layers/Wiring.js"
import { Auth } from "../services/Auth.js"
import { Coordination } from "../services/Coordination.js"
import { Daemons } from "../services/Daemons.js"
import { Leases } from "../services/Leases.js"
import { Ledger } from "../services/Ledger.js"
import { Notifications } from "../services/Notifications.js"
import { Portal } from "../services/Portal.js"
import { Waits } from "../services/Waits.js"
import type { Globals } from "./Store.js"
import { existingStoreOf, printJson } from "./Store.js"

/** The services the subscribers of a revocation ask, each provided the ones it asks. */
export const revocationServices = Layer.merge(Waits.Default, Notifications.Default).pipe(
  Layer.provideMerge(Ledger.Default),
  Layer.provideMerge(Layer.mergeAll(Coordination.Default, Portal.Default, Daemons.Default, Leases.Default)),
  Layer.provideMerge(Auth.Default)
)

export const connectionRevoke = (o: Globals & { readonly user: string | undefined; readonly selector: string }) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    Effect.provide(
      Effect.flatMap(Auth, (auth) => auth.revoke(o.selector, o.user)),
      commandOn(store, revocationServices, everySubscriber)
    ).pipe(Effect.flatMap(printJson)))

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
