import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { Effect, Redacted, Runtime } from "effect"
import { Dispatcher } from "./Dispatch.js"
import { makeMcpServer } from "./McpServer.js"
import type { ToolNaming } from "./Registry.js"

/**
 * MCP over stdio for one bearer (`SOPHIA_BEARER`). The bearer is checked against its row on every
 * request, exactly as over HTTP. Nothing but MCP messages is written to stdout: logs go to stderr.
 * Completes when stdin ends or the client closes.
 */
export const serveStdio = (bearer: Redacted.Redacted<string>, naming: ToolNaming) =>
  Effect.gen(function*() {
    const dispatcher = yield* Dispatcher
    const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
    const authenticate = dispatcher.authenticate(Redacted.value(bearer))
    // refuse to start at all with a bearer that does not authenticate now
    yield* authenticate
    const server = makeMcpServer({
      dispatcher,
      naming,
      runPromise,
      resolveCaller: () => runPromise(Effect.option(authenticate)).then((o) => o._tag === "Some" ? o.value : undefined)
    })
    const transport = new StdioServerTransport()
    yield* Effect.acquireRelease(
      Effect.promise(() => server.connect(transport)),
      () => Effect.promise(() => server.close())
    )
    yield* Effect.async<void>((resume) => {
      const done = () => resume(Effect.void)
      const previous = server.onclose
      server.onclose = () => {
        previous?.()
        done()
      }
      process.stdin.once("end", done)
      process.stdin.once("close", done)
    })
  }).pipe(Effect.scoped)
