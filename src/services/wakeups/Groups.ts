import { Clock, Deferred, Effect, Exit } from "effect"
import { Unauthenticated } from "../../domain/Errors.js"
import type { DomainEvent } from "../../domain/Events.js"

/** Whose poll it is: the calling connection and its user. */
export interface PollOwner {
  readonly userId: string
  readonly connectionId: string
}

/** One long poll, as its service describes it. */
export interface PollSpec<A, E> {
  readonly owner: PollOwner
  /**
   * Polls of one connection with the same key read the same thing (the same read, the same filters): they form
   * a group, and a wake-up is one read of the group, not one per poll.
   */
  readonly key: string
  /** which committed events could give the read something to return (an over-approximation is fine) */
  readonly matches: (event: DomainEvent) => boolean
  /**
   * What a read that found something means for the group's other polls. "shared": each of them returns it too
   * (a read that consumes nothing: a peek, a conversation page, an approval's status). "consumed": the read
   * took it (marked it read for the connection), so the others have nothing new — unless `more` says the read
   * may have left some behind (a full page), and another read follows.
   */
  readonly sharing: "shared" | "consumed"
  /** when the poll ends with what it has (epoch ms) */
  readonly deadline: number
  readonly read: Effect.Effect<A, E>
  /** the read has something to return */
  readonly found: (a: A) => boolean
  readonly more?: ((a: A) => boolean) | undefined
  /**
   * When to read again with no event (epoch ms, given what the last read found and the time): what can change
   * without a committed event heard here — a lease past its expiry, a holder gone silent. Absent: only events
   * and the deadline.
   */
  readonly readAgainAt?: ((a: A, now: number) => number) | undefined
}

/** What a waiting poll is told. */
type Signal =
  /** read for the group now */
  | { readonly _tag: "Read" }
  /** another poll of the group read this for you */
  | { readonly _tag: "Found"; readonly value: unknown }
  | { readonly _tag: "Revoked" }
  /** the poll's own time to read again came (`PollSpec.readAgainAt`) */
  | { readonly _tag: "Again" }
  | { readonly _tag: "Deadline" }

interface Member {
  /** holds the group's one woken read (told to read, not done yet) */
  reader: boolean
}

interface Group {
  readonly userId: string
  readonly connectionId: string
  readonly key: string
  readonly matches: (event: DomainEvent) => boolean
  readonly shared: boolean
  /** the polls waiting for a signal, in arrival order */
  readonly waiting: Map<Member, Deferred.Deferred<Signal>>
  members: number
  /** matching events heard so far */
  wakes: number
  /** the wakes a finished read is known to have seen */
  covered: number
  /** a read must follow even with no new wake (the last one left some behind, or never finished) */
  again: boolean
  /** a woken read is in flight (one at a time per group) */
  reading: boolean
  revoked: boolean
}

/** Tell a waiting poll; false when it is no longer waiting (told already). */
const tell = (group: Group, member: Member, signal: Signal) => {
  const deferred = group.waiting.get(member)
  if (deferred === undefined) return false
  group.waiting.delete(member)
  Deferred.unsafeDone(deferred, Exit.succeed(signal))
  return true
}

/**
 * Start the group's next woken read when one is due and nobody is reading: the longest waiting poll reads.
 * True when one started.
 */
const kick = (group: Group) => {
  if (group.revoked || group.reading || !(group.wakes > group.covered || group.again)) return false
  const first = group.waiting.keys().next()
  if (first.done === true) return false
  group.reading = true
  group.again = false
  first.value.reader = true
  return tell(group, first.value, { _tag: "Read" })
}

/** The woken read is over (done, failed or abandoned): the group may read again. */
const releaseReader = (group: Group, member: Member, finished: boolean) => {
  if (!member.reader) return
  member.reader = false
  group.reading = false
  if (!finished) group.again = true
}

/** A read of the group (any poll's) finished; `start`: the wakes it had heard when it began. */
const settle = <A>(group: Group, spec: PollSpec<A, unknown>, start: number, a: A) => {
  if (spec.found(a) && group.shared && !group.revoked) {
    for (const member of [...group.waiting.keys()]) tell(group, member, { _tag: "Found", value: a })
  }
  if (spec.found(a) && !group.shared && spec.more?.(a) === true) group.again = true
  else group.covered = Math.max(group.covered, start)
}

const addTo = <K, V>(map: Map<K, Set<V>>, key: K, value: V) => {
  let set = map.get(key)
  if (!set) map.set(key, set = new Set())
  set.add(value)
}
const removeFrom = <K, V>(map: Map<K, Set<V>>, key: K, value: V) => {
  const set = map.get(key)
  if (set?.delete(value) && set.size === 0) map.delete(key)
}

const newGroup = (spec: PollSpec<unknown, unknown>): Group => ({
  userId: spec.owner.userId,
  connectionId: spec.owner.connectionId,
  key: spec.key,
  matches: spec.matches,
  shared: spec.sharing === "shared",
  waiting: new Map(),
  members: 0,
  wakes: 0,
  covered: 0,
  again: false,
  reading: false,
  revoked: false
})

type Throttle = <A, E>(read: Effect.Effect<A, E>) => Effect.Effect<A, E>

/**
 * A poll's read — the group's woken read when `throttle` is given (taken in its turn) — then the group settled
 * with what it found, and its next woken read started if one is due (`wakeRead`).
 */
const readAs = <A, E>(
  group: Group,
  member: Member,
  spec: PollSpec<A, E>,
  throttle: Throttle | undefined,
  wakeRead: (group: Group) => void
) => {
  let start = group.wakes
  const read = Effect.suspend(() => {
    start = group.wakes
    return spec.read
  })
  return (throttle === undefined ? read : throttle(read)).pipe(
    Effect.onExit((exit) =>
      Effect.sync(() => {
        releaseReader(group, member, Exit.isSuccess(exit))
        if (Exit.isSuccess(exit)) settle(group, spec, start, exit.value)
        wakeRead(group)
      })
    )
  )
}

/**
 * Wait for a signal until the deadline, or `again` when that comes first: in the group's waiting line (which
 * may make this poll the reader at once), told `Deadline` (or `Again`) by a timer if nothing came first —
 * exactly one signal either way. `kicked`: a woken read started (counted).
 */
const nextSignal = (group: Group, member: Member, deadline: number, again: number, kicked: () => void) =>
  Effect.scoped(Effect.gen(function*() {
    const deferred = yield* Deferred.make<Signal>()
    const now = yield* Clock.currentTimeMillis
    group.waiting.set(member, deferred)
    if (kick(group)) kicked()
    const at = Math.min(deadline, again)
    const signal: Signal = at < deadline ? { _tag: "Again" } : { _tag: "Deadline" }
    yield* Effect.forkScoped(Effect.sleep(Math.max(0, at - now)).pipe(
      Effect.zipRight(Effect.sync(() => tell(group, member, signal)))
    ))
    return yield* Deferred.await(deferred)
  }))

/**
 * Parked long polls in groups (a connection and a key), woken once per matching event: one poll of the group
 * reads, and what it found settles the others (see `PollSpec.sharing`). Reads on wake-ups go through
 * `throttle`, so a post that wakes many connections' groups queues their reads there instead of in front of
 * every other call's writes. State is this process's; every change is one synchronous step.
 */
export const makeGroups = (throttle: Throttle, onHold: () => void) => {
  const byUser = new Map<string, Set<Group>>()
  const byKey = new Map<string, Group>()
  const byConnection = new Map<string, Set<Group>>()
  let parked = 0
  let wokenReads = 0
  /** `kick`, counting the woken reads it starts */
  const wakeRead = (group: Group) => {
    if (kick(group)) wokenReads++
  }

  const join = (spec: PollSpec<unknown, unknown>) =>
    Effect.sync(() => {
      const { connectionId, userId } = spec.owner
      const id = `${connectionId}\u0000${spec.key}`
      let group = byKey.get(id)
      if (group === undefined) {
        group = newGroup(spec)
        byKey.set(id, group)
        addTo(byUser, userId, group)
        addTo(byConnection, connectionId, group)
      }
      group.members++
      parked++
      onHold()
      return group
    })

  const leave = (group: Group, member: Member) =>
    Effect.sync(() => {
      group.waiting.delete(member)
      releaseReader(group, member, false)
      group.members--
      parked--
      if (group.members === 0) {
        byKey.delete(`${group.connectionId}\u0000${group.key}`)
        removeFrom(byUser, group.userId, group)
        removeFrom(byConnection, group.connectionId, group)
      } else {
        wakeRead(group)
      }
    })

  /**
   * A long poll: park first (so no event can slip between the read and the wait), read, and with nothing to
   * return wait for a signal — a read to make for the group, what another poll of the group found, the
   * connection's revocation, the poll's own time to read again (`readAgainAt`), or the deadline (then one last
   * read). Ends early, never late; interrupted (the
   * client went away), its parking is released with it.
   */
  const poll = <A, E>(spec: PollSpec<A, E>): Effect.Effect<A, E | Unauthenticated> =>
    Effect.scoped(Effect.gen(function*() {
      const member: Member = { reader: false }
      const group = yield* Effect.acquireRelease(join(spec as PollSpec<unknown, unknown>), (g) => leave(g, member))
      const readNow = (woken: boolean) => readAs(group, member, spec, woken ? throttle : undefined, wakeRead)
      let a = yield* readNow(false)
      while (true) {
        if (group.revoked) return yield* new Unauthenticated()
        const now = yield* Clock.currentTimeMillis
        if (spec.found(a) || now >= spec.deadline) return a
        const again = spec.readAgainAt === undefined ? spec.deadline : spec.readAgainAt(a, now)
        const signal = yield* nextSignal(group, member, spec.deadline, again, () => wokenReads++)
        switch (signal._tag) {
          case "Revoked":
            return yield* new Unauthenticated()
          case "Found":
            return signal.value as A
          case "Read":
            a = yield* readNow(true)
            break
          case "Again":
            a = yield* readNow(false)
            break
          case "Deadline":
            a = yield* readNow(false)
            if (group.revoked) return yield* new Unauthenticated()
            return a
        }
      }
    }))

  /** A committed event: one wake-up for each group of its user it concerns. Cost: one predicate per group. */
  const wake = (event: DomainEvent) => {
    const groups = byUser.get(event.user_id)
    if (groups === undefined) return
    for (const group of groups) {
      if (!group.revoked && group.matches(event)) {
        group.wakes++
        wakeRead(group)
      }
    }
  }

  /** The connection is revoked: each of its groups tells its waiting polls, and reads nothing more. */
  const revoke = (connectionId: string) => {
    for (const group of byConnection.get(connectionId) ?? []) {
      group.revoked = true
      for (const member of [...group.waiting.keys()]) tell(group, member, { _tag: "Revoked" })
    }
  }

  /** The connections with parked polls (and their users). */
  const connections = (into: Map<string, string>) => {
    for (const [connectionId, groups] of byConnection) {
      for (const group of groups) into.set(connectionId, group.userId)
    }
  }

  /** The keys of the parked groups that start with `prefix`, the prefix cut off (the approvals waited on). */
  const keysWith = (prefix: string) => {
    const keys = new Set<string>()
    for (const group of byKey.values()) if (group.key.startsWith(prefix)) keys.add(group.key.slice(prefix.length))
    return keys
  }

  return {
    poll,
    wake,
    revoke,
    connections,
    keysWith,
    parkedCount: () => parked,
    stats: () => {
      let waiting = 0
      for (const group of byKey.values()) waiting += group.waiting.size
      return { parked, waiting, groups: byKey.size, wokenReads }
    }
  } as const
}

export type Groups = ReturnType<typeof makeGroups>
