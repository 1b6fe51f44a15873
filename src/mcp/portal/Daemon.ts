import { Context, Layer, Option } from "effect"
import * as path from "node:path"
import type { ClientConfig, ClientStore } from "../ClientConfigs.js"
import { binPath, clientConfigs } from "../ClientConfigs.js"

/**
 * What the portal's `Create connection` must know of the daemon it runs in to print client entries that
 * start this Sophia: its store (the stdio entry opens the same database) and its bin, absolute. Provided
 * where the daemon is composed (`layers/App.ts` `ServeLive`), from the store it serves and this process.
 */
export class PortalDaemon extends Context.Tag("sophia/PortalDaemon")<PortalDaemon, {
  readonly store: ClientStore
  readonly bin: string
}>() {
  /** The daemon serving `store`; the bin is this process's (`binPath`), read when the layer is built. */
  static readonly layer = (store: ClientStore, bin?: string) =>
    Layer.sync(PortalDaemon, () => ({
      store: "url" in store || store.filename === ":memory:" ? store : { filename: path.resolve(store.filename) },
      bin: bin ?? binPath()
    }))
}

/** A database only this process holds: no stdio process can open it. */
const inMemory = (store: ClientStore) => !("url" in store) && store.filename === ":memory:"

/**
 * The ready client entries for a new bearer: Streamable HTTP, and stdio on the same database — none when
 * the database lives in the daemon's memory, or when the app was composed without `PortalDaemon` (an
 * embedder's server: its store and bin unknown here).
 */
export const newConnectionConfigs = (
  daemon: Option.Option<Context.Tag.Service<PortalDaemon>>,
  mcpUrl: string,
  bearer: string
): ReadonlyArray<ClientConfig> => {
  const { bin, store } = Option.getOrElse(daemon, () => ({ store: { filename: ":memory:" }, bin: "" }))
  return clientConfigs({ mcpUrl, bearer, store, bin }).filter((c) => !inMemory(store) || c.json.mcpServers.sophia.type === "http")
}
