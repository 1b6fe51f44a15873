import { Effect } from "effect"

/**
 * The store's write permit: one holder at a time, handed to waiters strictly in arrival order.
 *
 * Why not `Effect.makeSemaphore(1)`: its `release` wakes the waiters on a later scheduler tick, and a
 * fiber that asks in between takes the free permit at once; the woken waiter, finding it taken again,
 * queues anew at the back. Under a steady stream of writers (50 agents posting, appending and marking
 * reads) some waiters are overtaken again and again: measured, a p99 of seconds for calls whose own work
 * takes milliseconds. Here `release` hands the permit directly to the longest waiter, and nobody takes a
 * permit while anyone is waiting.
 */
export interface Permit {
  /** Wait for the permit (interruptible while waiting: an interrupted waiter leaves the queue). */
  readonly take: Effect.Effect<void>
  /** Give the permit back: to the next waiter if there is one. */
  readonly release: Effect.Effect<void>
  /** Whether someone holds the permit right now. */
  readonly held: () => boolean
}

interface Waiter {
  /** resumes the waiting fiber; called at most once */
  readonly wake: () => void
  /** the fiber was interrupted before its turn: skip it */
  cancelled: boolean
}

export const makePermit = (): Permit => {
  let held = false
  // a FIFO queue with a moving head (shift() is O(n); the array is compacted when drained)
  let queue: Array<Waiter> = []
  let head = 0

  const handOff = () => {
    while (head < queue.length) {
      const next = queue[head++]
      if (next.cancelled) continue
      if (head === queue.length) {
        queue = []
        head = 0
      }
      // still held: the permit passes straight to `next`, nobody can take it in between
      next.wake()
      return
    }
    queue = []
    head = 0
    held = false
  }

  const take: Effect.Effect<void> = Effect.async<void>((resume) => {
    if (!held) {
      held = true
      resume(Effect.void)
      return
    }
    let woken = false
    const waiter: Waiter = {
      cancelled: false,
      wake: () => {
        woken = true
        resume(Effect.void)
      }
    }
    queue.push(waiter)
    // interrupted while waiting: leave the queue; interrupted just as the permit arrived: pass it on
    return Effect.sync(() => {
      waiter.cancelled = true
      if (woken) handOff()
    })
  })

  return {
    take,
    release: Effect.sync(handOff),
    held: () => held
  }
}
