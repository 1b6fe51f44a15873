import { Effect, Option } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { EnvelopeFields } from "../../domain/Envelope.js"
import { Coordination } from "../Coordination.js"
import { StoreVersion } from "../store/Statements.js"
import { Waits } from "../Waits.js"

/** The envelope of one response, and whether the caller was quiet (no open and no undelivered wait). */
type Read = EnvelopeFields & { readonly quiet: boolean }

/** Connections whose quiet count is kept at most (a bound, not a tuning: past it the map starts over). */
const QUIET_MAX = 10_000

/**
 * The envelope every response carries: `_inbox_unread`, and — only while there is something to say —
 * `_blocking` (the caller's open waits) and `_wait_resolved` (once per resolution). Each part is asked of the
 * service that owns it: the unread count of Coordination (one statement, two primary-key lookups), the
 * waits' two flags of Waits (one statement over two partial indexes); only a caller with an open or an
 * undelivered wait costs more (`Waits.signalsAfter`). It runs on every response of every tool: untraced.
 */
export const makeEnvelope = Effect.gen(function*() {
  const coordination = yield* Coordination
  const waits = yield* Waits

  const version = yield* Effect.serviceOption(StoreVersion)
  // The two reads, one after the other where a statement is a few µs in process (SQLite: the store that
  // offers a version); where each is a round trip (Postgres), both at once, on two connections of the pool.
  const concurrent = Option.isNone(version)
  const both = (caller: Caller) => Effect.zip(coordination.unreadCount(caller), waits.flags(caller), { concurrent })

  const read = (caller: Caller, deliver: boolean): Effect.Effect<Read> =>
    Effect.flatMap(both(caller), ([unread, flags]): Effect.Effect<Read> =>
      !flags.open && !flags.undelivered
        ? Effect.succeed({ _inbox_unread: unread, quiet: true })
        : Effect.map(waits.signalsAfter(caller, flags, deliver), (signals) => ({
          _inbox_unread: unread,
          ...(signals.blocking.length > 0 ? { _blocking: signals.blocking } : {}),
          ...(signals.resolved.length > 0 ? { _wait_resolved: signals.resolved } : {}),
          quiet: false
        })))

  if (Option.isNone(version)) {
    return (caller: Caller, options?: { readonly deliver?: boolean }): Effect.Effect<EnvelopeFields> =>
      Effect.map(read(caller, options?.deliver ?? true), ({ quiet: _, ...fields }) => fields)
  }
  // A caller with no open and no undelivered wait gets `{ _inbox_unread }` only: kept per connection with
  // the store's version it was read at, and answered again while nothing was committed anywhere (an agent
  // polling a quiet store pays no statement). The version is taken before the reads, so a commit racing
  // them leaves an entry that is already stale. Callers with waits are read every time.
  // The store's own check (`current`) is paid only when the entry may still hold: after a commit of this
  // process (the caller's own write, usually) `known` has already moved past it, and is the stamp. Commits
  // that changed nothing an envelope reads (`EnvelopeNeutral`: a lease granted or released, say) are left
  // out of both, so the entry holds across them.
  const { neutral } = version.value
  const current = () => version.value.current() - neutral()
  const known = () => version.value.known() - neutral()
  const quiet = new Map<string, { readonly version: number; readonly userId: string; readonly unread: number }>()
  return (caller: Caller, options?: { readonly deliver?: boolean }): Effect.Effect<EnvelopeFields> =>
    Effect.suspend(() => {
      const kept = quiet.get(caller.connectionId)
      let at = known()
      if (kept !== undefined && kept.version === at) {
        at = current()
        if (kept.version === at && kept.userId === caller.userId) return Effect.succeed({ _inbox_unread: kept.unread })
      }
      return Effect.map(read(caller, options?.deliver ?? true), ({ quiet: isQuiet, ...fields }) => {
        if (isQuiet) {
          if (quiet.size >= QUIET_MAX) quiet.clear()
          quiet.set(caller.connectionId, { version: at, userId: caller.userId, unread: fields._inbox_unread })
        } else {
          quiet.delete(caller.connectionId)
        }
        return fields
      })
    })
})
