import type { Scope } from "effect"
import { Clock, Deferred, Duration, Effect, Exit, Option } from "effect"
import { RateLimited } from "../../domain/Errors.js"

/** Whose run it is: the calling connection and its user (the keys of the cap and of the fair queue). */
export interface RunOwner {
  readonly userId: string
  readonly connectionId: string
}

/** The setting that raises the per-connection cap (named in its refusal). */
export const RUNS_PER_CONNECTION_SETTING = "SOPHIA_SANDBOX_RUNS_PER_CONNECTION"

export interface AdmissionOptions {
  /** the pool's width: runs on children at once */
  readonly width: number
  /** runs one connection may hold at once, queued or running */
  readonly perConnection: number
}

interface Waiter {
  readonly owner: RunOwner
  readonly turn: Deferred.Deferred<void>
  granted: boolean
}

/** A count per key, the key gone at zero. */
const bump = (counts: Map<string, number>, key: string, by: number) => {
  const n = (counts.get(key) ?? 0) + by
  if (n > 0) counts.set(key, n)
  else counts.delete(key)
}

/**
 * Who may run a snippet, and when. Two rules, both exact (the state is this process's; every change is one
 * synchronous step, so concurrent calls cannot both see the last free place):
 *
 * - A connection holds at most `perConnection` runs at once, from the call's arrival to its end, queued or
 *   running; one more is refused at once (`RateLimited`, with the seconds until the earliest of its runs
 *   must have ended).
 * - A run waits for one of the pool's `width` places in a fair queue, not in arrival order: a free place goes
 *   to the user running the fewest snippets right now (ties: the user served longest ago), and within that
 *   user to its connection running the fewest (ties: served longest ago), first come first served within a
 *   connection. One user never holds more than `width - 1` places (when width > 1): one is always left for
 *   the others, so a flood of one user's endless loops cannot make another user's `return 1` wait for them.
 */
export const makeAdmission = (options: AdmissionOptions) => {
  const width = Math.max(1, options.width)
  const perUser = width > 1 ? width - 1 : 1
  const perConnection = Math.max(1, options.perConnection)

  /** each connection's held runs: when each must have ended (epoch ms) */
  const held = new Map<string, Array<number>>()
  /** waiters by user, then by connection; a Map's order is the rotation (served → moved to the back) */
  const queues = new Map<string, Map<string, Array<Waiter>>>()
  const runningByUser = new Map<string, number>()
  const runningByConnection = new Map<string, number>()
  let running = 0
  let queued = 0

  /** The entry with the fewest `running`, the first in rotation among equals (skipping `skip`). */
  const fewest = <V>(entries: Map<string, V>, counts: Map<string, number>, skip: (key: string) => boolean) => {
    let best: string | undefined
    let bestCount = Infinity
    for (const key of entries.keys()) {
      const count = counts.get(key) ?? 0
      if (count < bestCount && !skip(key)) {
        best = key
        bestCount = count
      }
    }
    return best
  }

  /** Hand free places to waiters, fairly, as long as there are both. */
  const grant = () => {
    while (running < width && queued > 0) {
      const user = fewest(queues, runningByUser, (u) => (runningByUser.get(u) ?? 0) >= perUser)
      if (user === undefined) return
      const connections = queues.get(user)!
      const connection = fewest(connections, runningByConnection, () => false)!
      const waiters = connections.get(connection)!
      const next = waiters.shift()!
      queued--
      // served: to the back of the rotation (or out of it, with nothing left waiting)
      connections.delete(connection)
      if (waiters.length > 0) connections.set(connection, waiters)
      queues.delete(user)
      if (connections.size > 0) queues.set(user, connections)
      next.granted = true
      running++
      bump(runningByUser, user, 1)
      bump(runningByConnection, connection, 1)
      Deferred.unsafeDone(next.turn, Exit.void)
    }
  }

  const enqueue = (owner: RunOwner) =>
    Effect.map(Deferred.make<void>(), (turn) => {
      const waiter: Waiter = { owner, turn, granted: false }
      let connections = queues.get(owner.userId)
      if (!connections) queues.set(owner.userId, connections = new Map())
      const waiters = connections.get(owner.connectionId)
      if (waiters) waiters.push(waiter)
      else connections.set(owner.connectionId, [waiter])
      queued++
      grant()
      return waiter
    })

  /** The run is over (or gave up waiting): its place, or its spot in the queue, is given up. */
  const leave = (waiter: Waiter) =>
    Effect.sync(() => {
      const { connectionId, userId } = waiter.owner
      if (waiter.granted) {
        running--
        bump(runningByUser, userId, -1)
        bump(runningByConnection, connectionId, -1)
      } else {
        const connections = queues.get(userId)
        const waiters = connections?.get(connectionId)
        const at = waiters?.indexOf(waiter) ?? -1
        if (at >= 0) {
          waiters!.splice(at, 1)
          queued--
          if (waiters!.length === 0) connections!.delete(connectionId)
          if (connections!.size === 0) queues.delete(userId)
        }
      }
      grant()
    })

  /**
   * Hold one of the connection's runs until the scope closes; refused at the cap. `endsBy`: when this run
   * will have ended at the latest (epoch ms), for the `retry_after_s` of the refusals it causes.
   */
  const hold = (owner: RunOwner, endsBy: number): Effect.Effect<void, RateLimited, Scope.Scope> =>
    Effect.acquireRelease(
      // the check and the count in one synchronous step: two calls can never both take the last place
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.suspend(() => {
          const mine = held.get(owner.connectionId) ?? []
          if (mine.length >= perConnection) {
            return Effect.fail(
              new RateLimited({
                what: "concurrent execute_code runs",
                limit: perConnection,
                retry_after_s: Math.max(1, Math.ceil((Math.min(...mine) - now) / 1000)),
                setting: RUNS_PER_CONNECTION_SETTING,
                hint: "wait for one of this connection's runs to end (each ends by its timeout_ms), or compose the work into one snippet"
              })
            )
          }
          mine.push(endsBy)
          held.set(owner.connectionId, mine)
          return Effect.succeed(mine)
        })),
      (mine) =>
        Effect.sync(() => {
          mine.splice(mine.indexOf(endsBy), 1)
          if (mine.length === 0) held.delete(owner.connectionId)
        })
    ).pipe(Effect.asVoid)

  /**
   * Wait in the fair queue for a place on the pool until `deadline` (epoch ms); the place is held until the
   * scope closes. "immediate": a place was free; "waited": it came in time; "late": the deadline passed
   * first (nothing is held then, and the run must not start).
   */
  const slot = (owner: RunOwner, deadline: number): Effect.Effect<"immediate" | "waited" | "late", never, Scope.Scope> =>
    Effect.gen(function*() {
      const waiter = yield* Effect.acquireRelease(Effect.suspend(() => enqueue(owner)), leave)
      if (waiter.granted) return "immediate" as const
      const now = yield* Clock.currentTimeMillis
      const turn = yield* Deferred.await(waiter.turn).pipe(Effect.timeout(Duration.millis(Math.max(0, deadline - now))), Effect.option)
      return Option.isSome(turn) ? "waited" as const : "late" as const
    })

  /** What is held and waiting right now (tests, diagnostics). */
  const snapshot = () => ({
    running,
    queued,
    runningByUser: new Map(runningByUser),
    heldByConnection: new Map([...held].map(([k, v]) => [k, v.length] as const))
  })

  return { hold, slot, snapshot, perConnection, perUser, width } as const
}

export type Admission = ReturnType<typeof makeAdmission>
