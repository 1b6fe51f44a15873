import { Config, Duration, Effect, Layer, Schedule } from "effect"
import { Auth } from "../services/Auth.js"
import { Leases } from "../services/Leases.js"
import { Waits } from "../services/Waits.js"

/**
 * The sweep: a scoped fiber that, every interval and whether or not anyone is watching, ends the leases past
 * their expiry (a `lease_free` wait may hold then), resolves overdue waits, and notices connections gone
 * silent (`ConnectionSilent`, once per silence). A failed tick is logged and the
 * loop goes on; the fiber is interrupted when the app's scope closes. `Schedule.fixed` keeps the cadence, so a
 * wait fires, and a lease ends, no later than its deadline + one interval.
 */
export const SweepLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const waits = yield* Waits
    const leases = yield* Leases
    const auth = yield* Auth
    const every = yield* Config.integer("SOPHIA_SWEEP_INTERVAL_MS").pipe(Config.withDefault(5000), Effect.orDie)
    yield* Effect.all([leases.sweep(), waits.sweep(), auth.noticeSilence()], { discard: true }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("sweep failed; retrying next tick", cause)),
      Effect.repeat(Schedule.fixed(Duration.millis(every))),
      Effect.annotateLogs({ fiber: "wait-sweep" }),
      Effect.forkScoped
    )
  })
)
