import { Clock, Config, Effect } from "effect"
import type { RateLimited } from "../domain/Errors.js"
import { Unauthenticated } from "../domain/Errors.js"
import type { DomainEvent } from "../domain/Events.js"
import type { PollOwner, PollSpec } from "./wakeups/Groups.js"
import { makeGroups } from "./wakeups/Groups.js"
import { makeHolds } from "./wakeups/Holds.js"
import { makeRevocations, makeWatchers } from "./wakeups/Watchers.js"

export type { PollOwner, PollSpec } from "./wakeups/Groups.js"

/** While nothing is held, how often `whenHeld` looks anyway (see there). */
const IDLE_LOOK = "1 minute"
/** The settings that raise the per-connection caps on parked polls (named in their refusals). */
export const LONG_POLLS_SETTING = "SOPHIA_LONG_POLLS_PER_CONNECTION"
export const APPROVAL_POLLS_SETTING = "SOPHIA_APPROVAL_POLLS_PER_CONNECTION"
/** Parked polls one connection may hold at once in a daemon, by default (docs/architecture.md, Limits). */
export const LONG_POLLS_PER_CONNECTION = 8
export const APPROVAL_POLLS_PER_CONNECTION = 8
/** Reads made on wake-ups at once, across the daemon (each further one waits its turn there). */
const WAKE_READS_AT_ONCE = 2

/**
 * Which kind of poll it is: `coordination_inbox` with `wait_s` and `lease_acquire` with `wait_s` count against
 * the long-poll cap, a wait for an approval's decision against the approval cap.
 */
export type PollKind = "inbox" | "lease" | "approval"

/**
 * Wake-ups for long polls (`coordination_inbox` with `wait_s`, `lease_acquire` with `wait_s`, `approval_status`
 * with `wait_s`, a gated call waiting for its decision), resource subscriptions and MCP sessions. It owns no table and reads nothing: a
 * poll re-reads through the service that owns the data, this service says when.
 *
 * - Polls park in groups, one per connection and read (`wakeups/Groups.ts`): an event wakes a group once, one
 *   of its polls reads, and what it found settles the others (a read that consumed the posts leaves the others
 *   nothing new; a read that consumed nothing is returned by all). Reads on wake-ups take one of
 *   `WAKE_READS_AT_ONCE` turns, so a post that wakes many connections does not queue all their reads in front
 *   of other users' calls.
 * - Each connection holds at most `SOPHIA_LONG_POLLS_PER_CONNECTION` parked inbox and lease polls together and
 *   `SOPHIA_APPROVAL_POLLS_PER_CONNECTION` parked approval waits (8 each); one more is refused `rate_limited`
 *   (`wakeups/Holds.ts`), the place given back when the poll ends.
 * - A connection's revocation (`ConnectionRevoked`) ends its polls at once (`Unauthenticated`), drops its
 *   subscriptions before any later event, and ends whatever waits on `revocation` (its MCP sessions).
 *
 * Events enter through `feed`, in commit order: `layers/App.ts` wires it to the events service's committed
 * listener (`WakeupFeed`), which also hears other daemons' events (Postgres, layers/CrossDaemon.ts) and other
 * processes' revocations and decisions (`ForeignWrites`, wakeups/Foreign.ts: it asks about the connections and
 * approvals `held` here). Cost per event: one map lookup by user, then one predicate per group of that user.
 */
export class Wakeups extends Effect.Service<Wakeups>()("sophia/Wakeups", {
  effect: Effect.gen(function*() {
    const longPolls = yield* Config.integer(LONG_POLLS_SETTING).pipe(Config.withDefault(LONG_POLLS_PER_CONNECTION), Effect.orDie)
    const approvalPolls = yield* Config.integer(APPROVAL_POLLS_SETTING).pipe(
      Config.withDefault(APPROVAL_POLLS_PER_CONNECTION),
      Effect.orDie
    )
    const long = makeHolds({
      what: "parked long polls (coordination_inbox or lease_acquire with wait_s)",
      limit: Math.max(1, longPolls),
      setting: LONG_POLLS_SETTING,
      hint: "wait for one of this connection's long polls to return (each ends by its wait_s), or call without wait_s"
    })
    const holds = {
      inbox: long,
      lease: long,
      approval: makeHolds({
        what: "parked approval waits (approval_status with wait_s)",
        limit: Math.max(1, approvalPolls),
        setting: APPROVAL_POLLS_SETTING,
        hint: "wait for one of this connection's approval_status waits to return (each ends by its wait_s)"
      })
    } as const
    // opened whenever something starts being held (a poll, a subscription, a session awaiting revocation), in
    // the same synchronous step that registers it: what looks after held things (`ForeignWrites`) sleeps on it
    // while nothing is held, instead of ticking
    const activity = yield* Effect.makeLatch(false)
    const onHold = () => activity.unsafeOpen()
    const wakeReads = yield* Effect.makeSemaphore(WAKE_READS_AT_ONCE)
    const groups = makeGroups((read) => wakeReads.withPermits(1)(read), onHold)
    const revocations = makeRevocations(onHold)
    const { isRevoked } = revocations
    const watchers = makeWatchers(isRevoked, onHold)

    /**
     * A long poll, capped per connection (`kind`), grouped and woken as the class comment says; a revoked
     * connection's poll ends `Unauthenticated`.
     */
    const poll = <A, E>(kind: PollKind, spec: PollSpec<A, E>): Effect.Effect<A, E | Unauthenticated | RateLimited> =>
      Effect.suspend(() =>
        isRevoked(spec.owner.connectionId)
          ? Effect.fail(new Unauthenticated())
          : Effect.scoped(Effect.zipRight(holds[kind].hold(spec.owner.connectionId, spec.deadline), groups.poll(spec)))
      )

    /**
     * A committed event (this daemon's, another daemon's, or another process's as `ForeignWrites` found it). A
     * revocation first ends the connection's polls, drops its subscriptions and tells its sessions.
     */
    const feed = (event: DomainEvent): Effect.Effect<void> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync(() => {
          if (event._tag === "ConnectionRevoked") {
            revocations.revoke(event.connection_id, now)
            groups.revoke(event.connection_id)
            watchers.drop(event.user_id, event.connection_id)
          }
          groups.wake(event)
          watchers.notify(event)
        }))

    /**
     * What is held here now: each connection with a parked poll, a subscription or a session waiting on its
     * revocation (connection id → user id), none already heard revoked.
     */
    const held = (): ReadonlyMap<string, string> => {
      const connections = new Map<string, string>()
      groups.connections(connections)
      watchers.connections(connections)
      revocations.connections(connections)
      for (const connectionId of revocations.revokedIds()) connections.delete(connectionId)
      return connections
    }

    /**
     * Resolves once something is held here (at once if something is); `ForeignWrites` idles on it. The latch
     * opens in the step that registers a hold, and is closed only before holds are counted again, so no hold
     * is missed; `IDLE_LOOK` is a last resort (the one timer left while idle).
     */
    const holding = () => held().size > 0
    const whenHeld: Effect.Effect<void> = Effect.suspend(() =>
      holding()
        ? Effect.void
        : Effect.zipRight(
          activity.close,
          Effect.suspend(() => (holding() ? Effect.void : Effect.asVoid(Effect.timeoutOption(activity.await, IDLE_LOOK))))
        )
    )

    return {
      poll,
      watch: watchers.watch,
      revocation: revocations.revocation,
      whenHeld,
      feed,
      held,
      isRevoked,
      /** the keys of parked poll groups under a prefix (`approval:` → the approvals waited on) */
      awaitedKeys: groups.keysWith,
      /** how many polls and subscriptions are parked right now (tests: an abandoned poll leaves nothing behind) */
      parkedCount: () => groups.parkedCount() + watchers.count(),
      /** parked polls, their groups, and the reads made on wake-ups so far (tests, the benchmark) */
      stats: groups.stats,
      limits: { inbox: holds.inbox.limit, approval: holds.approval.limit }
    } as const
  })
}) {}
