/**
 * `sophia serve` (the daemon, with its banner) and `sophia stdio` (MCP over stdin/stdout for one bearer).
 * Heavy modules (the app, the MCP transports, tracing) are imported inside the handlers.
 */
import { Config, Console, Effect, Layer, Option } from "effect"
import type { StoreChoice } from "../layers/App.js"
import { binPath, clientConfigsText, shellQuote } from "../mcp/ClientConfigs.js"
import type { ToolNaming } from "../mcp/Registry.js"
import { VERSION } from "../Version.js"
import type { Globals } from "./Store.js"
import { CliFailure, existingStoreOf, storeOf } from "./Store.js"

export interface ServeOptions extends Globals {
  readonly host: string
  readonly port: number
  readonly toolNames: ToolNaming
}

/** The lines every start prints after the endpoint: how to mint, decide, stop, and the portal link. */
const hints = (options: { store: StoreChoice; baseUrl: string; portalLink: string }) => {
  const bin = `${shellQuote(process.execPath)} ${shellQuote(binPath())}`
  const dbFlag = "url" in options.store ? "--database-url <url>" : `--db ${shellQuote(options.store.filename)}`
  return [
    `Mint more:  ${bin} connection create --name <agent> --profile observer|assistant|full ${dbFlag}`,
    `Approvals:  ${bin} approvals list ${dbFlag}`,
    `Stop:       Ctrl-C, or kill ${process.pid} (SIGTERM); metrics at ${options.baseUrl}/metrics`,
    ``,
    `The owner's portal (this link logs you in once, within 10 minutes; \`sophia portal\` prints a new one):`,
    `    ${options.portalLink}`,
    ``
  ]
}

export const serve = (o: ServeOptions) =>
  Effect.gen(function*() {
    const store = yield* storeOf(o)
    const [app, { HttpServer }, { Auth }, { TracingLive }] = yield* Effect.promise(() =>
      Promise.all([
        import("../index.js"),
        import("../mcp/Http.js"),
        import("../services/Auth.js"),
        import("../observability/Tracing.js")
      ])
    )
    const where = "url" in store ? "Postgres" : store.filename
    const banner = Layer.effectDiscard(Effect.gen(function*() {
      const auth = yield* Auth
      const http = yield* HttpServer
      const minted = yield* auth.bootstrapOwner()
      // every start prints a fresh portal link (one use, 10 minutes; `sophia portal` mints more)
      const portalLink = `${http.baseUrl}/portal/login?token=${(yield* (yield* app.Portal).mintLogin()).token}`
      const ready = `Sophia ${VERSION} listening; MCP endpoint ${http.mcpUrl} (database ${where}; pid ${process.pid})`
      const more = hints({ store, baseUrl: http.baseUrl, portalLink })
      // one write, so a reader that saw the endpoint line has the bearer too
      yield* Console.log(Option.match(minted, {
        onNone: () => [ready, ``, ...more].join("\n"),
        onSome: ({ bearer, name }) =>
          [
            ready,
            ``,
            `First start: created the owner and a first full connection "${name}".`,
            `Its bearer is shown once, now; store it:`,
            ``,
            `    ${bearer}`,
            ``,
            clientConfigsText({ mcpUrl: http.mcpUrl, bearer, store, bin: binPath() }),
            ``,
            ...more
          ].join("\n")
      }))
    }))
    yield* Layer.launch(
      banner.pipe(
        Layer.provideMerge(app.ServeLive({ store, host: o.host, port: o.port, naming: o.toolNames })),
        Layer.provide(TracingLive({ name: "sophia", version: VERSION }))
      )
    )
  })

export const stdio = (o: Globals & { readonly toolNames: ToolNaming }) =>
  Effect.gen(function*() {
    const bearer = yield* Config.redacted("SOPHIA_BEARER").pipe(
      Effect.mapError(() =>
        new CliFailure({ message: "set SOPHIA_BEARER to the bearer of the connection this stdio server speaks for" })
      )
    )
    const store = yield* existingStoreOf(o)
    const [app, { serveStdio }, { TracingLive }] = yield* Effect.promise(() =>
      Promise.all([import("../index.js"), import("../mcp/Stdio.js"), import("../observability/Tracing.js")])
    )
    yield* serveStdio(bearer, o.toolNames).pipe(
      Effect.catchTag("Unauthenticated", (e) => Effect.fail(new CliFailure({ message: `SOPHIA_BEARER: ${e.message}` }))),
      Effect.provide(app.DaemonLive(store).pipe(Layer.provide(TracingLive({ name: "sophia", version: VERSION }))))
    )
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect): the daemon's, with signals. */
export { runDaemon as runEffect } from "./RunDaemon.js"
