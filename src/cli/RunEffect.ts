/**
 * Runs a short command's Effect program: the logger its global flags chose, the console without colour
 * codes off a terminal, failures reported as one `sophia: …` line (cli/Output.ts) with exit code 1. The
 * process ends when the program does. Nothing of `@effect/platform-node` is loaded: a command needs no
 * platform service, and the daemon's runner (cli/RunDaemon.ts: signals, graceful shutdown) is the serving
 * commands' own.
 */
import { Console, Effect, Logger } from "effect"
import type { LogFormat, LogLevelName } from "../observability/LogNames.js"
import { loggerLayer, logLevelOf } from "../observability/Logging.js"
import { cliConsole, report } from "./Output.js"

/** The program as a command runs it: logged as the flags say, every failure one line on stderr. */
export const asCommand = (program: Effect.Effect<void, unknown>, logLevel: LogLevelName, logFormat: LogFormat) =>
  program.pipe(
    Effect.catchAllCause((cause) => report(cause, ["all", "trace", "debug"].includes(logLevel))),
    Effect.provide(loggerLayer(logFormat)),
    Logger.withMinimumLogLevel(logLevelOf(logLevel)),
    Effect.withConsole(cliConsole(Effect.runSync(Console.consoleWith(Effect.succeed))))
  )

export const runEffect = (program: Effect.Effect<void, unknown>, logLevel: LogLevelName, logFormat: LogFormat) => {
  Effect.runFork(asCommand(program, logLevel, logFormat))
}
