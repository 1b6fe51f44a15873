/**
 * Runs a command's Effect program: the logger its global flags chose, the console without colour codes
 * off a terminal, failures reported as one `sophia: …` line (cli/Output.ts). Loaded only by the commands
 * that are Effect programs.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Console, Effect, Layer, Logger } from "effect"
import type { LogFormat, LogLevelName } from "../observability/LogNames.js"
import { loggerLayer, logLevelOf } from "../observability/Logging.js"
import { cliConsole, report } from "./Output.js"

export const runEffect = (program: Effect.Effect<void, unknown>, logLevel: LogLevelName, logFormat: LogFormat) => {
  const debug = ["all", "trace", "debug"].includes(logLevel)
  program.pipe(
    Effect.catchAllCause((cause) => report(cause, debug)),
    Effect.provide(Layer.mergeAll(NodeContext.layer, loggerLayer(logFormat))),
    Logger.withMinimumLogLevel(logLevelOf(logLevel)),
    Effect.withConsole(cliConsole(Effect.runSync(Console.consoleWith(Effect.succeed)))),
    // failures are reported above, on stderr; runMain's own report would go through a logger we do not control
    NodeRuntime.runMain({ disableErrorReporting: true, disablePrettyLogger: true })
  )
}
