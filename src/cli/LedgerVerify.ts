/** `ledger verify`: the Ledger alone (layers/Commands.ts); it writes nothing. */
import { Effect, Layer } from "effect"
import { commandOn } from "../layers/Commands.js"
import { Auth } from "../services/Auth.js"
import { Ledger } from "../services/Ledger.js"
import type { Globals } from "./Store.js"
import { CliFailure, existingStoreOf, printJson } from "./Store.js"

export const ledgerVerify = (o: Globals) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const report = yield* Effect.provide(
      Effect.flatMap(Ledger, (ledger) => ledger.verify()),
      commandOn(store, Ledger.Default.pipe(Layer.provideMerge(Auth.Default)))
    )
    yield* printJson(report)
    if (!report.ok) {
      const b = report.first_break!
      return yield* new CliFailure({ message: `ledger broken: ${b.work_id} seq ${b.seq}: ${b.reason}` })
    }
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
