import { Deferred, Effect, Exit, type Scope } from "effect"
import type { DomainEvent } from "../domain/Events.js"

/** One parked long poll: which committed events concern it (an over-approximation is fine: a woken poll re-reads). */
interface Parked {
  readonly matches: (event: DomainEvent) => boolean
  readonly wake: () => void
}

/**
 * Wake-ups for long polls (`coordination_inbox` with `wait_s`, `approval_status` with `wait_s`, resource
 * subscriptions). A long poll parks here (a scoped registration: interrupting the poll, or the client going
 * away, removes it) and is woken when a committed event that concerns it is fed in. It owns no table and
 * reads nothing: after a wake-up the poll re-reads through the service that owns the data.
 *
 * The feed is the one obvious place where events enter: `feed(event)`. `layers/App.ts` wires it to the
 * events service's committed-only listener (`WakeupFeed`); a cross-daemon source (LISTEN/NOTIFY on
 * Postgres) feeds the same method. Cost per event: one map lookup by user, then one predicate per poll
 * parked for that user (none for the other users' polls).
 */
export class Wakeups extends Effect.Service<Wakeups>()("sophia/Wakeups", {
  sync: () => {
    const byUser = new Map<string, Set<Parked>>()
    let count = 0

    const register = (userId: string, parked: Parked) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          let set = byUser.get(userId)
          if (!set) byUser.set(userId, set = new Set())
          set.add(parked)
          count++
        }),
        () =>
          Effect.sync(() => {
            const set = byUser.get(userId)
            if (set?.delete(parked)) {
              count--
              if (set.size === 0) byUser.delete(userId)
            }
          })
      )

    /** Register interest until the scope closes; the returned effect completes at the first matching event. */
    const park = (userId: string, matches: (event: DomainEvent) => boolean): Effect.Effect<Effect.Effect<void>, never, Scope.Scope> =>
      Effect.gen(function*() {
        const woken = yield* Deferred.make<void>()
        yield* register(userId, { matches, wake: () => Deferred.unsafeDone(woken, Exit.void) })
        return Deferred.await(woken)
      })

    /** Call `onEvent` for every matching event until the scope closes (a resource subscription). */
    const watch = (userId: string, matches: (event: DomainEvent) => boolean, onEvent: () => void): Effect.Effect<void, never, Scope.Scope> =>
      register(userId, { matches, wake: onEvent })

    /** A committed event (from this daemon's events service, or from another daemon): wake whom it concerns. */
    const feed = (event: DomainEvent): Effect.Effect<void> =>
      Effect.sync(() => {
        const set = byUser.get(event.user_id)
        if (!set) return
        for (const parked of set) {
          if (parked.matches(event)) parked.wake()
        }
      })

    /** How many polls are parked right now (tests: an abandoned poll leaves nothing behind). */
    const parkedCount = () => count

    return { park, watch, feed, parkedCount } as const
  }
}) {}
