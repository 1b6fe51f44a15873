import type { Scope } from "effect"
import { Effect, Exit, Ref } from "effect"
import type { Child } from "../../sandbox/Child.js"
import { kill, spawnChild } from "../../sandbox/Child.js"
import { spanned } from "../Spans.js"
import { restorePriority } from "./Priority.js"
import type { SandboxPoolOptions } from "./Types.js"

/**
 * The pool of warm child processes: one run each at a time, `warm` kept ready, each recycled after
 * `runsPerChild` runs or a fault. How many run at once (at most `max`) and in what order is decided before
 * a run reaches the pool (./Admission.ts). Every child is killed when the pool's scope closes.
 */
export const makePool = (options: SandboxPoolOptions): Effect.Effect<{
  /** Run `use` on an idle child (or a new one), then return or recycle it. */
  readonly withChild: <A, E>(use: (child: Child) => Effect.Effect<A, E>) => Effect.Effect<A, E>
  /** Top the idle children up to `warm`. */
  readonly refill: Effect.Effect<void>
  readonly pids: Effect.Effect<ReadonlyArray<number>>
}, never, Scope.Scope> =>
  Effect.gen(function*() {
    const all = new Set<Child>()
    const idle: Array<Child> = []
    const scope = yield* Effect.scope
    const closed = yield* Ref.make(false)

    yield* Effect.addFinalizer(() =>
      Ref.set(closed, true).pipe(Effect.zipRight(Effect.sync(() => {
        for (const child of all) kill(child)
        all.clear()
        idle.length = 0
      })))
    )

    const spawn = spanned("Sandbox.spawn", () =>
      spawnChild({
        execArgv: options.childExecArgv ?? [],
        onReady: (child) => all.add(child),
        onExit: (child) => {
          all.delete(child)
          const at = idle.indexOf(child)
          if (at >= 0) idle.splice(at, 1)
        }
      }))

    /** Top the idle pool up to `warm` (in the background of the pool's scope). */
    let refilling = false
    const refillOnce = Effect.gen(function*() {
      while (!(yield* Ref.get(closed)) && all.size < options.max && idle.length < options.warm) {
        const child = yield* spawn()
        if (yield* Ref.get(closed)) return kill(child)
        idle.push(child)
      }
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("sandbox pool refill failed", cause)),
      Effect.ensuring(Effect.sync(() => {
        refilling = false
      }))
    )
    const refill = Effect.suspend(() => {
      if (refilling) return Effect.void
      refilling = true
      return refillOnce
    })

    const acquire = Effect.suspend(() => {
      while (idle.length > 0) {
        const child = idle.shift()!
        if (!child.dead) return Effect.succeed(child)
      }
      return spawn()
    })

    const release = (child: Child, exit: Exit.Exit<unknown, unknown>) =>
      Effect.gen(function*() {
        child.sink = undefined
        // interrupted mid-run (the backstop deadline, a closing scope): the child may still be busy
        if (Exit.isInterrupted(exit)) child.faulted = true
        // a child lowered for a long run serves again only at normal priority
        if (!restorePriority(child)) child.faulted = true
        child.runs++
        if (child.dead || child.faulted || child.runs >= options.runsPerChild || idle.length >= options.warm) {
          kill(child)
          all.delete(child)
        } else {
          idle.push(child)
        }
        if (!(yield* Ref.get(closed)) && idle.length < options.warm) yield* Effect.forkIn(refill, scope)
      })

    const withChild = <A, E>(use: (child: Child) => Effect.Effect<A, E>) =>
      Effect.acquireUseRelease(acquire, use, release)

    if (options.prewarm) yield* Effect.forkIn(refill, scope)

    return {
      withChild,
      refill,
      pids: Effect.sync(() => [...all].filter((c) => !c.dead).map((c) => c.pid))
    }
  })
