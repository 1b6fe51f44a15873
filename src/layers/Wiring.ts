/**
 * Who hears what, of the subscribers that write to the store, in one place: the daemon runs it (after the
 * sandbox's in-memory subscriber, `layers/App.ts`), and so does every `sophia` command whose writes may reach
 * any of them (`layers/Services.ts`' `CommandServicesOn`, `connection revoke`'s layer). Kept apart from the
 * services' composition so that a command can wire it over the services it builds (layers/Commands.ts).
 */
import { Effect } from "effect"
import type { Coordination } from "../services/Coordination.js"
import { Events } from "../services/Events.js"
import { Ledger } from "../services/Ledger.js"
import { Notifications } from "../services/Notifications.js"
import { Waits } from "../services/Waits.js"
import type { Publishes } from "./Commands.js"
import { subscribeConnectionCreated } from "./ConnectionWiring.js"

/**
 * Who hears what, of the subscribers that write to the store: every one, in the order it runs, with the
 * policy that says what its failure does to the write (see `services/Events.ts`). The daemon's in-memory
 * subscriber (the sandbox's, `layers/App.ts`) runs before these. This is the one place they are wired (the
 * first, `ConnectionCreated`'s, from layers/ConnectionWiring.ts, which the commands that mint take alone:
 * layers/Commands.ts); no service registers itself.
 */
export const subscribeStoreSubscribers = Effect.gen(function*() {
  const events = yield* Events
  const waits = yield* Waits
  const ledger = yield* Ledger
  const notifications = yield* Notifications
  yield* subscribeConnectionCreated
  // a wait resolves with the post that satisfies it, or not at all: the post rolls back if that fails
  yield* events.subscribe({ on: "PostLanded", name: "Waits.onPostLanded", policy: "atomic", handle: waits.onPostLanded })
  // the ledger's observations are evidence about a write, never a condition of it
  yield* events.subscribe({
    on: "PostLanded",
    name: "Ledger.observePost",
    policy: "isolated",
    when: ledger.observesPost,
    handle: ledger.observePost
  })
  yield* events.subscribe({
    on: "ConnectionRevoked",
    name: "Waits.onConnectionRevoked",
    policy: "atomic",
    handle: waits.onConnectionRevoked
  })
  yield* events.subscribe({
    on: "ConnectionRevoked",
    name: "Ledger.observeRevocation",
    policy: "isolated",
    handle: ledger.observeRevocation
  })
  // a lease that ended may free a `lease_free` wait: it resolves with the end, or the end rolls back
  yield* events.subscribe({
    on: "LeaseChanged",
    name: "Waits.onLeaseChanged",
    policy: "atomic",
    when: (e) => e.change !== "granted" && e.change !== "renewed",
    handle: waits.onLeaseChanged
  })
  // a grant that would close a cycle of waits is refused (wait_cycle) and rolls back
  yield* events.subscribe({
    on: "LeaseChanged",
    name: "Waits.onLeaseGranted",
    policy: "refusing",
    when: (e) => e.change === "granted",
    handle: waits.onLeaseGranted
  })
  yield* events.subscribe({
    on: "WaitResolved",
    name: "Ledger.observeWait",
    policy: "isolated",
    when: ledger.observesWait,
    handle: ledger.observeWait
  })
  // the owner's notifications: written to the outbox with the event they report, or the write does not happen
  // (only the user's targets subscribed to it get a row; with none, one indexed read)
  yield* events.subscribe({
    on: "ApprovalRequested",
    name: "Notifications.onApprovalRequested",
    policy: "atomic",
    handle: notifications.onApprovalRequested
  })
  yield* events.subscribe({
    on: "ApprovalDecided",
    name: "Notifications.onApprovalDecided",
    policy: "atomic",
    handle: notifications.onApprovalDecided
  })
  yield* events.subscribe({
    on: "WaitResolved",
    name: "Notifications.onWaitResolved",
    policy: "atomic",
    when: notifications.endsBadly,
    handle: notifications.onWaitResolved
  })
  yield* events.subscribe({
    on: "ConnectionRevoked",
    name: "Notifications.onConnectionRevoked",
    policy: "atomic",
    handle: notifications.onConnectionRevoked
  })
  yield* events.subscribe({
    on: "ConnectionSilent",
    name: "Notifications.onConnectionSilent",
    policy: "atomic",
    handle: notifications.onConnectionSilent
  })
})

/** Every subscriber that writes, wired: a layer that runs this may publish any event (layers/Commands.ts). */
export const everySubscriber: Publishes<Waits | Ledger | Notifications | Coordination> = {
  events: "every",
  wire: subscribeStoreSubscribers
}
