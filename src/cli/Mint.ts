/**
 * `connection create`, and what `setup claude-code|codex` mint with: Auth and Coordination (a new connection
 * starts caught up where Coordination records it), wired for `ConnectionCreated` alone (layers/Commands.ts).
 */
import { Effect, Layer } from "effect"
import { commandOn, type Publishes } from "../layers/Commands.js"
import { CONNECTION_CREATED, subscribeConnectionCreated } from "../layers/ConnectionWiring.js"
import { Auth } from "../services/Auth.js"
import { Coordination } from "../services/Coordination.js"
import type { Globals } from "./Store.js"
import { printJson, storeOf } from "./Store.js"

/** The services a mint needs. */
export const mintServices = Coordination.Default.pipe(Layer.provideMerge(Auth.Default))

/** What a mint publishes, and its subscribers. */
export const mintPublishes: Publishes<Coordination> = { events: CONNECTION_CREATED, wire: subscribeConnectionCreated }

export interface CreateOptions extends Globals {
  readonly name: string
  readonly profile: "observer" | "assistant" | "full"
  readonly user: string | undefined
  readonly scope: string | undefined
  readonly backlog: boolean
  readonly allowElicitation: boolean
}

export const connectionCreate = (o: CreateOptions) =>
  Effect.gen(function*() {
    const store = yield* storeOf(o)
    const m = yield* Effect.provide(
      Effect.flatMap(Auth, (auth) =>
        auth.createConnection({
          name: o.name,
          profile: o.profile,
          user: o.user,
          backlog: o.backlog,
          allowElicitation: o.allowElicitation,
          scope: (o.scope ?? "").split(",").map((x) => x.trim()).filter((x) => x.length > 0)
        })),
      commandOn(store, mintServices, mintPublishes)
    )
    yield* printJson({ connection_id: m.connection_id, name: m.name, profile: m.profile, user_id: m.user_id, bearer: m.bearer })
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
