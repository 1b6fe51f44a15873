import type { Scope } from "effect"
import { Clock, Effect } from "effect"
import { RateLimited } from "../../domain/Errors.js"

/** What a cap holds and how its refusal says so. */
export interface HoldRule {
  /** what a connection holds, in the refusal's words ("parked long polls") */
  readonly what: string
  readonly limit: number
  /** the setting that raises it */
  readonly setting: string
  readonly hint: string
}

/**
 * A cap on what one connection holds at once in this daemon (parked polls of a kind). Exact: the check and
 * the count are one synchronous step, so two calls can never both take the last place; a place is given
 * back when the scope closes, however the holder ends.
 */
export const makeHolds = (rule: HoldRule) => {
  /** each connection's held places: when each ends at the latest (epoch ms) */
  const held = new Map<string, Array<number>>()

  /** Hold a place until the scope closes, or be refused at the cap; `endsBy` sets the refusal's `retry_after_s`. */
  const hold = (connectionId: string, endsBy: number): Effect.Effect<void, RateLimited, Scope.Scope> =>
    Effect.acquireRelease(
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.suspend(() => {
          const mine = held.get(connectionId) ?? []
          if (mine.length >= rule.limit) {
            return Effect.fail(
              new RateLimited({
                what: rule.what,
                limit: rule.limit,
                retry_after_s: Math.max(1, Math.ceil((Math.min(...mine) - now) / 1000)),
                setting: rule.setting,
                hint: rule.hint
              })
            )
          }
          mine.push(endsBy)
          held.set(connectionId, mine)
          return Effect.succeed(mine)
        })),
      (mine) =>
        Effect.sync(() => {
          mine.splice(mine.indexOf(endsBy), 1)
          if (mine.length === 0) held.delete(connectionId)
        })
    ).pipe(Effect.asVoid)

  return { hold, limit: rule.limit } as const
}

export type Holds = ReturnType<typeof makeHolds>
