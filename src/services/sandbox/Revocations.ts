import type { Fiber, Scope } from "effect"
import { Clock, Deferred, Effect, Equal, Exit } from "effect"

/** How long a revocation is remembered: longer than any run that started before it can last. */
const REMEMBER_MS = 10 * 60_000

/** A running snippet of one connection, as revocation reaches it. */
export interface Watched {
  /** its inner calls in flight (HostCalls adds each and removes it once done) */
  readonly calls: Set<Fiber.RuntimeFiber<unknown, unknown>>
  /** completed when its connection is revoked */
  readonly revoked: Deferred.Deferred<void>
  /** whether its connection is revoked (asked by each inner call before it is made) */
  readonly isRevoked: () => boolean
}

/**
 * The connections revoked while this daemon runs snippets, and the runs each has going. Fed by the
 * `ConnectionRevoked` event (wired in layers/App.ts: inside the revoking transaction for this daemon's
 * revocations, and from the committed stream for the other daemons'); asked by every inner call.
 *
 * Why inside the revoking transaction: what it does there — remember the connection, interrupt its runs'
 * calls in flight, tell its runs to end — is in memory and cannot fail, and it happens before the
 * revocation commits. A write an inner call had not committed yet is then interrupted before it can take
 * the store after the revocation (SQLite: the write permit passes in arrival order, and an interrupted
 * waiter gives it up; Postgres: the interruption reaches a write still running before its COMMIT, barring
 * one already committing at that instant); no later call is made. So nothing of that connection is written
 * after `revoked_at`. A revocation on another daemon reaches this one after its commit, over NOTIFY: the
 * runs end as promptly, but a write that started in those milliseconds may still land.
 */
export const makeRevocations = () => {
  /** connection id → when this daemon heard of its revocation (epoch ms) */
  const revoked = new Map<string, number>()
  const running = new Map<string, Set<Watched>>()

  const isRevoked = (connectionId: string): boolean => revoked.has(connectionId)

  /** The connection is revoked: every run of it is told, its calls in flight interrupted. Idempotent. */
  const revoke = (connectionId: string): Effect.Effect<void> =>
    Effect.flatMap(Effect.fiberId, (by) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync(() => {
          if (!revoked.has(connectionId)) {
            // forget the old ones (a revoked bearer is refused at the door: only runs already going matter)
            for (const [id, at] of revoked) {
              if (now - at < REMEMBER_MS) break
              revoked.delete(id)
            }
            revoked.set(connectionId, now)
          }
          for (const run of running.get(connectionId) ?? []) {
            // interrupted from here, not awaited: an awaited call may be waiting for the very store this
            // revocation holds (and never the call that is revoking, which would undo its own revocation)
            for (const call of run.calls) if (!Equal.equals(call.id(), by)) call.unsafeInterruptAsFork(by)
            Deferred.unsafeDone(run.revoked, Exit.void)
          }
        })))

  /**
   * Watch a run of `connectionId` until the scope closes. The returned Deferred completes when the
   * connection is revoked — at once when it already was (the call authenticated just before).
   */
  const watch = (connectionId: string): Effect.Effect<Watched, never, Scope.Scope> =>
    Effect.flatMap(Deferred.make<void>(), (signal) => {
      const run: Watched = { calls: new Set(), revoked: signal, isRevoked: () => revoked.has(connectionId) }
      return Effect.acquireRelease(
        Effect.sync(() => {
          let set = running.get(connectionId)
          if (!set) running.set(connectionId, set = new Set())
          set.add(run)
          if (revoked.has(connectionId)) Deferred.unsafeDone(signal, Exit.void)
          return run
        }),
        () =>
          Effect.sync(() => {
            const set = running.get(connectionId)
            set?.delete(run)
            if (set?.size === 0) running.delete(connectionId)
          })
      )
    })

  return { isRevoked, revoke, watch } as const
}

export type Revocations = ReturnType<typeof makeRevocations>
