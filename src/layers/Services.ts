/**
 * The services that keep the graph, over whatever `SqlClient` is provided, and every subscriber that
 * persists something of a domain event: what a process needs to write to the graph with every
 * consequence of the write. The daemon (`layers/App.ts`) adds to it the services that only answer
 * agents (knowledge, search, orient, hooks, the sandbox), the feeds and the tool surface; a `sophia`
 * command (`connection revoke`, `approvals approve`…) runs on this alone, so it loads no MCP layer, no
 * sandbox and no portal, and still writes every consequence a daemon's write would.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { Approvals } from "../services/Approvals.js"
import { Auth } from "../services/Auth.js"
import { Coordination } from "../services/Coordination.js"
import { Daemons } from "../services/Daemons.js"
import { Events } from "../services/Events.js"
import { Leases } from "../services/Leases.js"
import { Notifications } from "../services/Notifications.js"
import { Portal } from "../services/Portal.js"
import { Ledger } from "../services/Ledger.js"
import { Waits } from "../services/Waits.js"
import { Wakeups } from "../services/Wakeups.js"
import { subscribeConnectionCreated } from "./ConnectionWiring.js"
import type { StoreChoice } from "./Sql.js"
import { storeLayer } from "./Sql.js"

/** The store's choice, for the commands that run on the whole graph (cli/Owner.ts). */
export type { StoreChoice } from "./Sql.js"

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

/** The store-facing services below the ledger (each provided the ones it asks); `coordination` as `storeServices` says. */
const coreServices = <E, R>(coordination: Layer.Layer<Coordination, E, R>) =>
  Layer.mergeAll(coordination, Approvals.Default, Portal.Default, Daemons.Default, Leases.Default).pipe(
    Layer.provideMerge(Auth.Default),
    Layer.provideMerge(Layer.merge(Events.Default, Wakeups.Default))
  )

/**
 * The services that keep the graph (no subscriber wired: the caller wires them, in its order). `ledger` and
 * `coordination` swap those implementations (tests prove the others work against fakes that keep no table).
 */
export const storeServices = <E = never, R = never, E2 = never, R2 = never>(
  ledger: Layer.Layer<Ledger, E, R | Auth | Events | SqlClient.SqlClient> = Ledger.Default,
  coordination: Layer.Layer<Coordination, E2, R2 | Auth | Events | Wakeups | SqlClient.SqlClient> = Coordination.Default
) =>
  // the wait graph asks the ledger for the claims half of its orphans; notifications of orphans ask it for claims too
  Layer.merge(Waits.Default, Notifications.Default).pipe(Layer.provideMerge(ledger), Layer.provideMerge(coreServices(coordination)))

/**
 * What a `sophia` command runs on: the services that keep the graph over the store it names, with every
 * subscriber that writes — a revocation from the CLI ends the connection's waits and is observed on its
 * claims exactly as one from the portal. (A daemon serving the same store hears the CLI's revocations and
 * decisions through `ForeignWrites`.)
 */
export const CommandServicesOn = (store: StoreChoice) =>
  Layer.effectDiscard(subscribeStoreSubscribers).pipe(Layer.provideMerge(storeServices()), Layer.provideMerge(storeLayer(store)))
