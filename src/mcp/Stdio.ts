import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { Effect, Redacted, Runtime } from "effect"
import { Wakeups } from "../services/Wakeups.js"
import { Dispatcher } from "./Dispatch.js"
import { makeMcpServer } from "./McpServer.js"
import type { ToolNaming } from "./Registry.js"

/**
 * MCP over stdio for one bearer (`SOPHIA_BEARER`). The bearer is checked against its row on every
 * request, exactly as over HTTP. Nothing but MCP messages is written to stdout: logs go to stderr.
 * Completes when stdin ends, the client closes, or the connection's revocation is heard (`Wakeups.revocation`:
 * the CLI's, found by `ForeignWrites` within a second) — its long polls answer `unauthenticated` first.
 */
export const serveStdio = (bearer: Redacted.Redacted<string>, naming: ToolNaming) =>
  Effect.gen(function*() {
    const dispatcher = yield* Dispatcher
    const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
    const authenticate = dispatcher.authenticate(Redacted.value(bearer))
    const wakeups = yield* Wakeups
    // refuse to start at all with a bearer that does not authenticate now
    const caller = yield* authenticate
    // tool calls in flight: a revoked connection's server ends once their answers (`unauthenticated`) are out
    let calls = 0
    const server = makeMcpServer({
      dispatcher,
      naming,
      runPromise,
      calls: (delta) => void (calls += delta),
      resolveCaller: () => runPromise(Effect.option(authenticate)).then((o) => o._tag === "Some" ? o.value : undefined)
    })
    const transport = new StdioServerTransport()
    yield* Effect.acquireRelease(
      Effect.promise(() => server.connect(transport)),
      () => Effect.promise(() => server.close())
    )
    const revoked = yield* wakeups.revocation(caller)
    const closedByClient = Effect.async<void>((resume) => {
      const done = () => resume(Effect.void)
      const previous = server.onclose
      server.onclose = () => {
        previous?.()
        done()
      }
      process.stdin.once("end", done)
      process.stdin.once("close", done)
    })
    const answered = Effect.sleep("20 millis").pipe(Effect.repeat({ until: () => calls === 0 }), Effect.timeout("5 seconds"), Effect.ignore)
    const revokedHere = revoked.pipe(
      // the answers on their way (its polls' `unauthenticated`) leave first; the scope then closes the server
      Effect.zipRight(answered),
      Effect.zipRight(Effect.logWarning("this connection was revoked: the stdio server ends"))
    )
    yield* Effect.raceFirst(closedByClient, revokedHere)
  }).pipe(Effect.scoped)
