import { Config, Duration, Effect, Layer, Schedule } from "effect"
import { Waits } from "../services/Waits.js"

/**
 * The wait sweep: a scoped fiber resolving overdue waits every interval, whether or not anyone is
 * watching. A failed tick is logged and the loop goes on; the fiber is interrupted when the app's scope
 * closes. `Schedule.fixed` keeps the cadence, so a wait fires no later than its deadline + one interval.
 */
export const SweepLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const waits = yield* Waits
    const every = yield* Config.integer("SOPHIA_SWEEP_INTERVAL_MS").pipe(Config.withDefault(5000), Effect.orDie)
    yield* waits.sweep().pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("wait sweep failed; retrying next tick", cause)),
      Effect.repeat(Schedule.fixed(Duration.millis(every))),
      Effect.annotateLogs({ fiber: "wait-sweep" }),
      Effect.forkScoped
    )
  })
)
