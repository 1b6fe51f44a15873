/**
 * The services that keep the graph, over whatever `SqlClient` is provided, and every subscriber that
 * persists something of a domain event (wired by layers/Wiring.ts): what a process needs to write to the graph
 * with every consequence of the write. The daemon (`layers/App.ts`) adds to it the services that only answer
 * agents (knowledge, search, orient, hooks, the sandbox), the feeds and the tool surface; `sophia
 * approvals approve|deny` runs on this alone, so it loads no MCP layer, no
 * sandbox and no portal, and still writes every consequence a daemon's write would.
 */
import type { SqlClient } from "@effect/sql"
import { Layer } from "effect"
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
import type { StoreChoice } from "./Sql.js"
import { storeLayer } from "./Sql.js"
import { subscribeStoreSubscribers } from "./Wiring.js"

/** The store's choice, for the commands that run on the whole graph (cli/Owner.ts). */
export type { StoreChoice } from "./Sql.js"

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
