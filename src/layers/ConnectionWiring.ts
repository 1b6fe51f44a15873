/**
 * Who hears `ConnectionCreated`: part of the one wiring of the subscribers that write (layers/Wiring.ts runs
 * it first), kept apart so that the commands that mint a connection (`connection create`, `setup`) wire it
 * without loading the services the rest of the wiring needs (layers/Commands.ts).
 */
import { Effect } from "effect"
import { Coordination } from "../services/Coordination.js"
import { Events } from "../services/Events.js"

/** The events this wiring covers: a layer that runs it may publish these. */
export const CONNECTION_CREATED = ["ConnectionCreated"] as const

export const subscribeConnectionCreated = Effect.gen(function*() {
  const events = yield* Events
  const coordination = yield* Coordination
  // a new connection starts where Coordination records it (caught up unless minted with its backlog), or is not minted
  yield* events.subscribe({
    on: "ConnectionCreated",
    name: "Coordination.onConnectionCreated",
    policy: "atomic",
    handle: coordination.onConnectionCreated
  })
})
