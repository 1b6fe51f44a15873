/**
 * The `sophia` CLI's entry: the command line parsed (cli/Program.ts) into the Effect of one command, run
 * with the logger its global flags chose; output and failures as cli/Output.ts writes them (a failure is
 * one `sophia: …` line on stderr, exit 1). Commands load the modules they use when they run.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Console, Effect, Layer, Logger } from "effect"
import { cliConsole, report } from "./cli/Output.js"
import { parseCommandLine } from "./cli/Program.js"
import { loggerLayer, logLevelOf } from "./observability/Logging.js"

const parsed = parseCommandLine(process.argv)

if (parsed._tag === "Refused") {
  process.stderr.write(`sophia: ${parsed.message}\n`)
  process.exitCode = 1
} else if (parsed._tag === "Run") {
  const debug = ["all", "trace", "debug"].includes(parsed.logLevel)
  parsed.run.pipe(
    Effect.catchAllCause((cause) => report(cause, debug)),
    Effect.provide(Layer.mergeAll(NodeContext.layer, loggerLayer(parsed.logFormat))),
    Logger.withMinimumLogLevel(logLevelOf(parsed.logLevel)),
    Effect.withConsole(cliConsole(Effect.runSync(Console.consoleWith(Effect.succeed)))),
    // failures are reported above, on stderr; runMain's own report would go through a logger we do not control
    NodeRuntime.runMain({ disableErrorReporting: true, disablePrettyLogger: true })
  )
}
