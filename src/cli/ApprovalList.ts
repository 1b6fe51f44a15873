/** `approvals list`: Approvals alone (layers/Commands.ts); it writes nothing. */
import { Effect, Layer } from "effect"
import { commandOn } from "../layers/Commands.js"
import { Approvals } from "../services/Approvals.js"
import { Auth } from "../services/Auth.js"
import type { Globals } from "./Store.js"
import { existingStoreOf, printJson } from "./Store.js"

export const approvalsList = (o: Globals & { readonly all: boolean }) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    Effect.provide(
      Effect.flatMap(Approvals, (a) => a.list({ all: o.all })),
      commandOn(store, Approvals.Default.pipe(Layer.provideMerge(Auth.Default)))
    ).pipe(Effect.flatMap(printJson)))

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
