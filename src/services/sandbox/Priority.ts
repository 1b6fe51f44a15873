import { Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import type { Child } from "../../sandbox/Child.js"

/**
 * A long, CPU-bound run yields the CPU to short ones. A snippet still computing after LOW_PRIORITY_AFTER_MS
 * (it used at least a fifth of that time on the CPU, however loaded the machine) has its child process
 * lowered in the OS scheduler (niceness LOW_PRIORITY): alone on the machine it runs as fast as before
 * (nothing else wants the CPU); beside other runs — another user's `return 1`, the daemon's own work — it
 * gets a small share, so endless loops on every child cannot make everyone else wait for a core. A run that
 * mostly waits (for its inner calls) is left alone. After the run the child is raised back to normal before
 * it serves again; where the OS refuses that (an unprivileged process may lower a priority but not raise it
 * again), the child is recycled instead.
 */
export const LOW_PRIORITY_AFTER_MS = 250
const LOW_PRIORITY = 10

const lowered = new WeakSet<Child>()

/**
 * The thread ids of a process: on Linux a priority is a thread's, and a snippet runs on one of
 * isolated-vm's threads, not the main one (/proc lists them); elsewhere, the process as a whole.
 */
const threadsOf = (pid: number): Array<number> => {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).map(Number)
  } catch {
    return [pid]
  }
}

/** Set every thread's priority; false if any was refused (a thread that exited meanwhile is no refusal). */
const setAll = (pid: number, priority: number): boolean => {
  let ok = true
  for (const tid of threadsOf(pid)) {
    try {
      os.setPriority(tid, priority)
    } catch (e) {
      if ((e as { code?: string }).code !== "ESRCH") ok = false
    }
  }
  return ok
}

/** CPU time the process used so far, in ms (Linux: /proc/<pid>/stat, in ticks of 10 ms); undefined elsewhere. */
const cpuMs = (pid: number): number | undefined => {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    // after the command: state is field 3, utime 14 and stime 15 (1-based)
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return undefined
  }
}

/**
 * For the run now starting on `child` (forked in the run's scope: a run that ends first is never lowered):
 * after LOW_PRIORITY_AFTER_MS, lower the child if the run was computing all that while.
 */
export const yieldWhenLong = (child: Child): Effect.Effect<void> =>
  Effect.suspend(() => {
    const before = cpuMs(child.pid)
    return Effect.delay(
      Effect.sync(() => {
        if (child.dead || lowered.has(child)) return
        const after = cpuMs(child.pid)
        if (before !== undefined && after !== undefined && after - before < LOW_PRIORITY_AFTER_MS / 5) return
        // marked first: whatever part was lowered is raised again (or the child recycled) after the run
        lowered.add(child)
        setAll(child.pid, LOW_PRIORITY)
      }),
      Duration.millis(LOW_PRIORITY_AFTER_MS)
    )
  })

/** Raise a lowered child back to normal; false when that is refused (the child must not serve again). */
export const restorePriority = (child: Child): boolean => {
  if (!lowered.has(child)) return true
  if (child.dead) return false
  if (!setAll(child.pid, 0)) return false
  lowered.delete(child)
  return true
}
