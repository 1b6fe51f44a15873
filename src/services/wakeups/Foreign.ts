import { Config, Effect, Layer, Option } from "effect"
import { ConnectionRevoked } from "../../domain/Events.js"
import { Approvals } from "../Approvals.js"
import { Auth } from "../Auth.js"
import { Events } from "../Events.js"
import { StoreVersion } from "../store/Statements.js"
import { Wakeups } from "../Wakeups.js"

/** The setting: how often a daemon looks for what other processes wrote without telling it. */
export const RECHECK_SETTING = "SOPHIA_RECHECK_MS"
const RECHECK_MS = 1_000
/** Connection ids asked about in one statement. */
const IDS_AT_ONCE = 500

/**
 * What other processes wrote without telling this daemon: the CLI's `connection revoke` and `approvals
 * approve|deny` (and a stdio agent's writes) commit on the same store but publish nothing here — on SQLite
 * there is no channel between processes, and the CLI sends no NOTIFY on Postgres either. Every
 * `SOPHIA_RECHECK_MS` (1000), for what is held in Wakeups right now (the connections with parked polls,
 * subscriptions or open MCP sessions; the approvals waited on), one statement asks Auth which of those
 * connections are revoked and one asks Approvals which of those approvals are decided; what it finds is
 * delivered to this daemon's listeners as the events the other process committed (`Events.deliver`, as another
 * daemon's arrive): polls end, sessions close, waits wake, the sandbox ends the runs.
 *
 * Cheap: nothing is read while nothing is held, and on SQLite nothing while the store has not moved
 * (`StoreVersion`, a few µs) — except the connections and approvals that started being held since the last
 * look, asked about once. On Postgres (no store version) the two statements run each time something is held.
 */
export const ForeignWrites = Layer.scopedDiscard(Effect.gen(function*() {
  const wakeups = yield* Wakeups
  const auth = yield* Auth
  const approvals = yield* Approvals
  const events = yield* Events
  const version = yield* Effect.serviceOption(StoreVersion)
  const every = yield* Config.integer(RECHECK_SETTING).pipe(
    Config.orElse(() => Config.integer("SOPHIA_APPROVAL_RECHECK_MS")),
    Config.withDefault(RECHECK_MS),
    Effect.orDie
  )
  let seen: number | undefined
  // what was found live / pending at the last look (asked about again only when the store moved)
  const live = new Set<string>()
  const pending = new Set<string>()

  const look = Effect.gen(function*() {
    const connections = wakeups.held()
    const awaited = wakeups.awaitedKeys("approval:")
    if (connections.size === 0 && awaited.size === 0) return
    // the version is taken before the reads: a commit after it moves the next one
    const now = Option.isSome(version) ? version.value.current() : undefined
    const moved = now === undefined || now !== seen
    seen = now
    for (const id of live) if (!connections.has(id)) live.delete(id)
    for (const id of pending) if (!awaited.has(id)) pending.delete(id)

    const ids = [...connections.keys()].filter((id) => moved || !live.has(id))
    for (let i = 0; i < ids.length; i += IDS_AT_ONCE) {
      const chunk = ids.slice(i, i + IDS_AT_ONCE)
      const found = yield* auth.connections(chunk)
      for (const id of chunk) {
        const info = found.get(id)
        if (info !== undefined && info.revoked_at === null) {
          live.add(id)
          continue
        }
        yield* events.deliver(
          new ConnectionRevoked({ user_id: connections.get(id)!, connection_id: id, at: info?.revoked_at ?? new Date(0).toISOString() })
        )
      }
    }

    const approvalIds = [...awaited].filter((id) => moved || !pending.has(id))
    if (approvalIds.length === 0) return
    const decided = yield* approvals.decisionsAmong(approvalIds)
    const decidedIds = new Set(decided.map((d) => d.approval_id))
    for (const id of approvalIds) if (!decidedIds.has(id)) pending.add(id)
    for (const event of decided) yield* events.deliver(event)
  })

  // while nothing is held the fiber sleeps on Wakeups (no timer ticks: an idle daemon, or a test's
  // TestClock moved by hours, costs nothing)
  yield* Effect.zipRight(wakeups.whenHeld, Effect.zipRight(Effect.sleep(every), look)).pipe(
    Effect.catchAllCause((cause) => Effect.logWarning("looking for other processes' writes failed", cause)),
    Effect.forever,
    Effect.annotateLogs({ fiber: "foreign-writes" }),
    Effect.forkScoped
  )
}))
