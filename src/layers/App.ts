import type { SqlClient } from "@effect/sql"
import { Layer } from "effect"
import { Dispatcher } from "../mcp/Dispatch.js"
import { Envelope } from "../mcp/Envelope.js"
import * as Http from "../mcp/Http.js"
import type { ToolSet } from "../mcp/Registry.js"
import { ToolRegistry } from "../mcp/Registry.js"
import { orientTools } from "../mcp/tools/orient.js"
import { Auth } from "../services/Auth.js"
import { runMigrations } from "./Migrations.js"
import * as SqliteStore from "./SqliteStore.js"

/** A SQLite store with every migration applied. */
export const sqliteStore = (filename: string) =>
  Layer.effectDiscard(runMigrations).pipe(Layer.provideMerge(SqliteStore.layer({ filename })), Layer.orDie)

/** Every service, over whatever store is provided. */
export const ServicesLive = Layer.mergeAll(Auth.Default)

/** The whole tool surface. */
export const allToolSets = [orientTools] as const
export const RegistryLive = ToolRegistry.fromToolSets(...allToolSets)

export const EnvelopeLive = Envelope.Empty

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
  Http.layer(options).pipe(Layer.provideMerge(SophiaLive(options.filename)))
