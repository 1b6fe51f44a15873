import type { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import type { Caller } from "../domain/Auth.js"
import { Dispatcher } from "../mcp/Dispatch.js"
import { Envelope } from "../mcp/Envelope.js"
import * as Http from "../mcp/Http.js"
import { ToolRegistry } from "../mcp/Registry.js"
import { coordinationTools } from "../mcp/tools/coordination.js"
import { knowledgeTools } from "../mcp/tools/knowledge.js"
import { ledgerTools } from "../mcp/tools/ledger.js"
import { orientTools } from "../mcp/tools/orient.js"
import { sandboxTools } from "../mcp/tools/sandbox.js"
import { systemTools } from "../mcp/tools/system.js"
import { waitTools } from "../mcp/tools/waits.js"
import { Approvals } from "../services/Approvals.js"
import { Auth } from "../services/Auth.js"
import { Coordination } from "../services/Coordination.js"
import { Knowledge } from "../services/Knowledge.js"
import { Catalog } from "../mcp/Catalog.js"
import { Ledger } from "../services/Ledger.js"
import { SandboxLive, SandboxWarmUp } from "../services/Sandbox.js"
import { Orient } from "../services/Orient.js"
import { Waits } from "../services/Waits.js"
import { runMigrations } from "./Migrations.js"
import * as SqliteStore from "./SqliteStore.js"
import { SweepLive } from "./Sweep.js"

/** A SQLite store with every migration applied. */
export const sqliteStore = (filename: string) =>
  Layer.effectDiscard(runMigrations).pipe(Layer.provideMerge(SqliteStore.layer({ filename })), Layer.orDie)

/** Every service, over whatever store is provided. */
// In dependency order: each level is provided the ones below it (one instance of each service).
export const ServicesLive = Waits.Default.pipe(
  Layer.provideMerge(Layer.mergeAll(Ledger.Default, Orient.Default)),
  Layer.provideMerge(Layer.mergeAll(Coordination.Default, Approvals.Default, Knowledge.Default, Catalog.Default)),
  Layer.provideMerge(Auth.Default),
  // execute_code's pool: no child process until the first run (SandboxWarmUp pre-spawns in the daemon)
  Layer.merge(SandboxLive)
)

/** The whole tool surface. */
export const allToolSets = [orientTools, systemTools, ledgerTools, coordinationTools, waitTools, knowledgeTools, sandboxTools] as const
export const RegistryLive = ToolRegistry.fromToolSets<Layer.Layer.Success<typeof ServicesLive>>(...allToolSets)

/**
 * The envelope every response carries: `_inbox_unread` (two key lookups), and — only while there is
 * something to say — `_blocking` (the caller's open waits) and `_wait_resolved` (once per resolution).
 */
export const EnvelopeLive = Layer.effect(
  Envelope,
  Effect.gen(function*() {
    const coordination = yield* Coordination
    const waits = yield* Waits
    return {
      fields: (caller: Caller, options?: { readonly deliver?: boolean }) =>
        Effect.map(
          Effect.all([waits.signals(caller, options?.deliver ?? true), coordination.unreadCount(caller)]),
          ([signals, unread]) => ({
            _inbox_unread: unread,
            ...(signals.blocking.length > 0 ? { _blocking: signals.blocking } : {}),
            ...(signals.resolved.length > 0 ? { _wait_resolved: signals.resolved } : {})
          })
        )
    }
  })
)

/**
 * Services + registry + dispatcher over a store. `registry` swaps the tool surface (tests register
 * throwaway tools to drive the access rules).
 */
export const makeCore = <E, R>(
  store: Layer.Layer<SqlClient.SqlClient | SqliteStore.SqliteStore, E, R>,
  registry: Layer.Layer<ToolRegistry, never, Layer.Layer.Success<typeof ServicesLive>> = RegistryLive
) => {
  const services = ServicesLive.pipe(Layer.provideMerge(store))
  return Dispatcher.Default.pipe(
    Layer.provideMerge(Layer.mergeAll(registry, EnvelopeLive)),
    Layer.provideMerge(services)
  )
}

/** The embeddable app over a SQLite file: services, registry and dispatcher (no transport). */
export const SophiaLive = (filename: string) => makeCore(sqliteStore(filename))

/** The same over a fresh in-memory SQLite: what tests use. */
export const SophiaTest = makeCore(sqliteStore(":memory:"))

/** The served daemon: the app plus the HTTP transport. */
export const ServeLive = (options: { readonly filename: string } & Http.HttpConfig) =>
  Layer.mergeAll(Http.layer(options), SweepLive, SandboxWarmUp).pipe(Layer.provideMerge(SophiaLive(options.filename)))

/** A long-running process over a SQLite file without HTTP (stdio): the app plus the wait sweep. */
export const DaemonLive = (filename: string) => Layer.merge(SweepLive, SandboxWarmUp).pipe(Layer.provideMerge(SophiaLive(filename)))
