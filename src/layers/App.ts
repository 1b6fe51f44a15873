import type { SqlClient } from "@effect/sql"
import { Effect, Layer, Queue } from "effect"
import { Dispatcher } from "../mcp/Dispatch.js"
import { Envelope } from "../mcp/Envelope.js"
import * as Http from "../mcp/Http.js"
import { ToolRegistry } from "../mcp/Registry.js"
import { approvalTools } from "../mcp/tools/approvals.js"
import { coordinationTools } from "../mcp/tools/coordination.js"
import { knowledgeTools } from "../mcp/tools/knowledge.js"
import { leaseTools } from "../mcp/tools/leases.js"
import { ledgerTools } from "../mcp/tools/ledger.js"
import { orientTools } from "../mcp/tools/orient.js"
import { sandboxTools } from "../mcp/tools/sandbox.js"
import { systemTools } from "../mcp/tools/system.js"
import { waitTools } from "../mcp/tools/waits.js"
import { Approvals } from "../services/Approvals.js"
import { Auth } from "../services/Auth.js"
import { Coordination } from "../services/Coordination.js"
import { Daemons } from "../services/Daemons.js"
import { Events } from "../services/Events.js"
import { Hooks } from "../services/Hooks.js"
import { Knowledge } from "../services/Knowledge.js"
import { Leases } from "../services/Leases.js"
import { Catalog } from "../mcp/Catalog.js"
import { Ledger } from "../services/Ledger.js"
import { Sandbox, SandboxLive, SandboxWarmUp } from "../services/Sandbox.js"
import { Orient } from "../services/Orient.js"
import { ReadModel } from "../services/readmodel/ReadModel.js"
import { Portal } from "../services/Portal.js"
import { PortalDaemon } from "../mcp/portal/Daemon.js"
import { PortalRoutesLive } from "../mcp/portal/Routes.js"
import { Search, SearchIndexFeed } from "../services/Search.js"
import { Embeddings } from "../services/Embeddings.js"
import { EmbeddingFeed } from "../services/embeddings/Feed.js"
import { Waits } from "../services/Waits.js"
import { Wakeups } from "../services/Wakeups.js"
import { ForeignWrites } from "../services/wakeups/Foreign.js"
import { MetricsScrapeLive, RequestLogOn } from "../observability/Metrics.js"
import type { StoreChoice } from "./Sql.js"
import { storeLayer, TestStore } from "./Sql.js"
import { storeServices } from "./Services.js"
import { subscribeStoreSubscribers } from "./Wiring.js"

/** The store layers embedders choose from (the seam: everything above needs only `SqlClient`). */
export { backupSqlite, describeStore, SqliteLive, StoreChoice, storeLayer, StoreUnavailable } from "./Sql.js"
export { PgLive } from "./Pg.js"

/** A store named by a SQLite file path or chosen explicitly (a Postgres URL); opening failures are defects here. */
const storeOf = (store: string | StoreChoice) => storeLayer(typeof store === "string" ? { filename: store } : store).pipe(Layer.orDie)
import { SweepLive } from "./Sweep.js"
import { CrossDaemonEvents } from "./CrossDaemon.js"
import { NotifyWorker } from "./NotifyWorker.js"

/**
 * Who hears what: the sandbox's in-memory subscriber first, then every subscriber that writes to the store
 * (`layers/Wiring.ts`, the one place those are wired; a `sophia` command runs them alone). No service
 * registers itself.
 */
export const EventWiring = Layer.effectDiscard(Effect.gen(function*() {
  const events = yield* Events
  const sandbox = yield* Sandbox
  // first, inside the revocation: the connection's execute_code runs end, their calls in flight interrupted
  // before the revocation commits (in memory; never fails)
  yield* events.subscribe({
    on: "ConnectionRevoked",
    name: "Sandbox.onConnectionRevoked",
    policy: "atomic",
    handle: sandbox.onConnectionRevoked
  })
  yield* subscribeStoreSubscribers
}))

/**
 * What wakes long polls (`wait_s`, `approval_status`, resource subscriptions) and ends a revoked connection's
 * polls and sessions: every committed domain event goes to `Wakeups.feed`, from one listener fiber that lives
 * as long as the app. This is the one place events enter the wake-ups: a cross-daemon source (Postgres
 * LISTEN/NOTIFY) and other processes' revocations and decisions (`ForeignWrites`) arrive here too, through
 * `Events.deliver`. Listeners hear committed writes only (see `services/Events.ts`).
 */
export const WakeupFeed = Layer.scopedDiscard(Effect.gen(function*() {
  const events = yield* Events
  const wakeups = yield* Wakeups
  const committed = yield* events.listen
  yield* Queue.take(committed).pipe(
    Effect.flatMap(wakeups.feed),
    Effect.forever,
    Effect.annotateLogs({ fiber: "wakeups" }),
    Effect.forkScoped
  )
}))

/**
 * Revocations committed anywhere reach the sandbox: another daemon's (Postgres: they arrive through
 * `Events.deliver`) end this daemon's runs of that connection too. This daemon's own were already heard
 * inside the revoking transaction (`EventWiring`); hearing one twice changes nothing.
 */
export const SandboxRevocationFeed = Layer.scopedDiscard(Effect.gen(function*() {
  const events = yield* Events
  const sandbox = yield* Sandbox
  const committed = yield* events.listen
  yield* Queue.take(committed).pipe(
    Effect.flatMap((event) => event._tag === "ConnectionRevoked" ? sandbox.onConnectionRevoked(event) : Effect.void),
    Effect.forever,
    Effect.annotateLogs({ fiber: "sandbox-revocations" }),
    Effect.forkScoped
  )
}))

/**
 * Every service and the event wiring, over whatever `SqlClient` is provided. `ledger` and `coordination`
 * swap those implementations (tests prove the others work against fakes that keep no table).
 */
export const makeServices = <E = never, R = never, E2 = never, R2 = never>(
  ledger: Layer.Layer<Ledger, E, R | Auth | Events | SqlClient.SqlClient> = Ledger.Default,
  coordination: Layer.Layer<Coordination, E2, R2 | Auth | Events | Wakeups | SqlClient.SqlClient> = Coordination.Default
) =>
  Layer.mergeAll(EventWiring, WakeupFeed, SearchIndexFeed, EmbeddingFeed, SandboxRevocationFeed, ForeignWrites).pipe(
    // (the hooks of agent runtimes ask the services below, as orient does)
    Layer.provideMerge(Layer.mergeAll(Orient.Default, Search.Default, Hooks.Default)),
    // dense retrieval: the provider's client and the vectors (off without SOPHIA_EMBEDDINGS_URL)
    Layer.provideMerge(Embeddings.Default),
    // the reads that span several services (the envelope, orient's counts, the portal's fleet, panorama)
    Layer.provideMerge(ReadModel.Default),
    Layer.provideMerge(Layer.merge(Knowledge.Default, Catalog.Default)),
    // the services that keep the graph (layers/Services.ts)
    Layer.provideMerge(storeServices(ledger, coordination)),
    // execute_code's pool: no child process until the first run (SandboxWarmUp pre-spawns in the daemon)
    Layer.provideMerge(SandboxLive)
  )

/** Every service, over whatever store is provided. */
export const ServicesLive = makeServices()

/** The whole tool surface. */
export const allToolSets = [
  orientTools,
  systemTools,
  approvalTools,
  ledgerTools,
  coordinationTools,
  waitTools,
  leaseTools,
  knowledgeTools,
  sandboxTools
] as const
export const RegistryLive = ToolRegistry.fromToolSets<Layer.Layer.Success<typeof ServicesLive>>(...allToolSets)

/** The envelope every response carries, as the read model composes it (`services/readmodel/Envelope.ts`). */
export const EnvelopeLive = Layer.effect(Envelope, Effect.map(ReadModel, (readModel) => ({ fields: readModel.envelope })))

/**
 * Services + registry + dispatcher over a store. `registry` swaps the tool surface (tests register
 * throwaway tools to drive the access rules).
 */
export const makeCore = <E, R>(
  store: Layer.Layer<SqlClient.SqlClient, E, R>,
  registry: Layer.Layer<ToolRegistry, never, Layer.Layer.Success<typeof ServicesLive>> = RegistryLive,
  services: typeof ServicesLive = ServicesLive
) => {
  const withStore = services.pipe(Layer.provideMerge(store))
  return Layer.merge(Dispatcher.Default, MetricsScrapeLive).pipe(
    Layer.provideMerge(Layer.mergeAll(registry, EnvelopeLive)),
    Layer.provideMerge(withStore)
  )
}

/** The embeddable app over a SQLite file (or a chosen store): services, registry and dispatcher (no transport). */
export const SophiaLive = (store: string | StoreChoice) => makeCore(storeOf(store))

/**
 * The same over a fresh in-memory SQLite — or a fresh Postgres schema in the suite's Postgres run
 * (`TestStore`): what tests use.
 */
export const SophiaTest = makeCore(TestStore)

/** The app over the store the CLI resolved (a SQLite file or a Postgres URL); opening failures are typed. */
export const SophiaOn = (store: StoreChoice) => makeCore(storeLayer(store))

/** Where this daemon listens, recorded in the database while it serves (so `sophia portal` links to it). */
const RecordedAddress = Layer.scopedDiscard(Effect.gen(function*() {
  const http = yield* Http.HttpServer
  const daemons = yield* Daemons
  yield* daemons.record(http.baseUrl)
}))

/**
 * The served daemon: the app plus the HTTP transport and the notifications' worker; on Postgres, committed events also travel to and
 * from the other daemons on the same database (LISTEN/NOTIFY; a no-op on SQLite).
 */
export const ServeLive = (options: { readonly store: StoreChoice } & Http.HttpConfig) =>
  Layer.mergeAll(Layer.merge(RecordedAddress, NotifyWorker).pipe(Layer.provideMerge(Http.layer(options))), SweepLive, SandboxWarmUp, CrossDaemonEvents).pipe(
    // the owner's portal under /portal (Http.ts hands it those paths); provided, not exported, so the
    // published type of ServeLive names no Node HTTP types (an embedder's type-check needs no @types/node)
    // (its `Create connection` prints client entries for this store and this process's bin)
    Layer.provide(PortalRoutesLive.pipe(Layer.provide(PortalDaemon.layer(options.store)))),
    Layer.provideMerge(SophiaOn(options.store).pipe(Layer.provide(RequestLogOn)))
  )

/** A long-running process over a store without HTTP (stdio): the app plus the wait sweep. */
export const DaemonLive = (store: StoreChoice) =>
  Layer.mergeAll(SweepLive, SandboxWarmUp, CrossDaemonEvents).pipe(
    Layer.provideMerge(SophiaOn(store).pipe(Layer.provide(RequestLogOn)))
  )
