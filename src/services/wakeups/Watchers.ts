import type { Scope } from "effect"
import { Deferred, Effect, Exit } from "effect"
import type { DomainEvent } from "../../domain/Events.js"
import type { PollOwner } from "./Groups.js"

/** A resource subscription: told of every matching event until its scope closes. */
interface Watcher {
  readonly connectionId: string
  readonly matches: (event: DomainEvent) => boolean
  readonly onEvent: () => void
}

/**
 * Resource subscriptions (`watch`): told of every matching event of their user, a revoked connection's never
 * again (`drop`, and `isRevoked` asked on each event).
 */
export const makeWatchers = (isRevoked: (connectionId: string) => boolean, onHold: () => void) => {
  const byUser = new Map<string, Set<Watcher>>()
  let count = 0

  const remove = (userId: string, watcher: Watcher) => {
    const set = byUser.get(userId)
    if (set?.delete(watcher)) {
      count--
      if (set.size === 0) byUser.delete(userId)
    }
  }

  /** Call `onEvent` for every matching event until the scope closes, or the connection is revoked. */
  const watch = (owner: PollOwner, matches: (event: DomainEvent) => boolean, onEvent: () => void): Effect.Effect<void, never, Scope.Scope> =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const watcher: Watcher = { connectionId: owner.connectionId, matches, onEvent }
        let set = byUser.get(owner.userId)
        if (!set) byUser.set(owner.userId, set = new Set())
        set.add(watcher)
        count++
        onHold()
        return watcher
      }),
      (watcher) => Effect.sync(() => remove(owner.userId, watcher))
    ).pipe(Effect.asVoid)

  const notify = (event: DomainEvent) => {
    const set = byUser.get(event.user_id)
    if (!set) return
    for (const watcher of set) {
      if (watcher.matches(event) && !isRevoked(watcher.connectionId)) watcher.onEvent()
    }
  }

  /** The connection is revoked: its subscriptions are dropped. */
  const drop = (userId: string, connectionId: string) => {
    for (const watcher of byUser.get(userId) ?? []) if (watcher.connectionId === connectionId) remove(userId, watcher)
  }

  /** The connections with a subscription (connection id → user id). */
  const connections = (into: Map<string, string>) => {
    for (const [userId, set] of byUser) {
      for (const watcher of set) if (watcher.connectionId !== "") into.set(watcher.connectionId, userId)
    }
  }

  return { watch, notify, drop, connections, count: () => count } as const
}

/** How long a revocation is remembered: a revoked bearer is refused at the door, only work already going matters. */
const REMEMBER_MS = 10 * 60_000

/** The connections heard revoked, and what waits for a connection's revocation (its MCP sessions). */
export const makeRevocations = (onHold: () => void) => {
  /** connection id → when this daemon heard of its revocation (epoch ms) */
  const revoked = new Map<string, number>()
  const awaiting = new Map<string, { readonly userId: string; readonly signals: Set<Deferred.Deferred<void>> }>()

  const isRevoked = (connectionId: string) => revoked.has(connectionId)

  /**
   * Until the scope closes, the connection counts as held (its liveness is checked); the returned effect
   * completes when its revocation is heard — at once when it already was.
   */
  const revocation = (owner: PollOwner): Effect.Effect<Effect.Effect<void>, never, Scope.Scope> =>
    Effect.flatMap(Deferred.make<void>(), (signal) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          if (isRevoked(owner.connectionId)) Deferred.unsafeDone(signal, Exit.void)
          else {
            let entry = awaiting.get(owner.connectionId)
            if (!entry) awaiting.set(owner.connectionId, entry = { userId: owner.userId, signals: new Set() })
            entry.signals.add(signal)
            onHold()
          }
          return Deferred.await(signal)
        }),
        () =>
          Effect.sync(() => {
            const entry = awaiting.get(owner.connectionId)
            if (entry?.signals.delete(signal) && entry.signals.size === 0) awaiting.delete(owner.connectionId)
          })
      ))

  /** Heard: remembered (the oldest forgotten after a while), and whatever waits on it is told. */
  const revoke = (connectionId: string, now: number) => {
    if (!revoked.has(connectionId)) {
      for (const [id, at] of revoked) {
        if (now - at < REMEMBER_MS) break
        revoked.delete(id)
      }
      revoked.set(connectionId, now)
    }
    for (const signal of awaiting.get(connectionId)?.signals ?? []) Deferred.unsafeDone(signal, Exit.void)
    awaiting.delete(connectionId)
  }

  /** The connections waited on (connection id → user id). */
  const connections = (into: Map<string, string>) => {
    for (const [connectionId, entry] of awaiting) into.set(connectionId, entry.userId)
  }

  return { isRevoked, revocation, revoke, connections, revokedIds: () => revoked.keys() } as const
}
