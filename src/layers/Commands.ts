/**
 * What a `sophia` command runs on: the services it asks, over the store it names, and no others — a command
 * builds (and its bundle holds, cli/*.ts: one bundle each) a few services rather than the graph's every one.
 *
 * Never less than its writes need: a command's layer names the events its writes publish, with the wiring
 * of their subscribers taken from where the daemon's is declared (layers/Wiring.ts, layers/ConnectionWiring.ts),
 * and `Events` is closed to those events: one the layer did not name is a defect that rolls its write back
 * (services/Events.ts), never a write with a subscriber skipped. The commands whose writes reach most of the
 * graph run with every subscriber wired: `connection revoke` on its own layer (cli/Revoke.ts: `everySubscriber`
 * over all but Approvals), `approvals approve|deny` on `CommandServicesOn` (layers/Services.ts).
 */
import type { SqlClient } from "@effect/sql"
import type { Effect } from "effect"
import { Layer } from "effect"
import type { DomainEventTag } from "../domain/Events.js"
import { Events } from "../services/Events.js"
import { Wakeups } from "../services/Wakeups.js"
import type { StoreChoice, StoreUnavailable } from "./Sql.js"
import { storeLayer } from "./Sql.js"

/** What the commands use of the store besides the services: its choice, and the SQLite backup. */
export { backupSqlite, type StoreChoice } from "./Sql.js"

/**
 * The events a command's writes publish, and the wiring of their subscribers (the daemon's own); `every` when
 * the wiring is every subscriber that writes (`everySubscriber`, layers/Wiring.ts): then any event may be published.
 */
export interface Publishes<R> {
  readonly events: ReadonlyArray<DomainEventTag> | "every"
  readonly wire: Effect.Effect<void, never, R | Events>
}

/** `services` (each provided the ones it asks, `Events` and `Wakeups` at the bottom) over the store. */
export const commandOn = <ROut, E>(
  store: StoreChoice,
  services: Layer.Layer<ROut, E, Events | Wakeups | SqlClient.SqlClient>,
  publishes?: Publishes<NoInfer<ROut>>
): Layer.Layer<ROut | Events | Wakeups | SqlClient.SqlClient, E | StoreUnavailable> => {
  const events = publishes?.events === "every" ? Events.Default : Events.closedTo(publishes?.events ?? [])
  const built = services.pipe(Layer.provideMerge(Layer.merge(events, Wakeups.Default)))
  const wired = publishes === undefined ? built : Layer.effectDiscard(publishes.wire).pipe(Layer.provideMerge(built))
  return wired.pipe(Layer.provideMerge(storeLayer(store)))
}
