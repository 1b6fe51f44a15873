/**
 * Runs a serving command's program (`serve`, `stdio`) as cli/RunEffect.ts runs a command, under
 * `@effect/platform-node`'s main runner: SIGINT and SIGTERM interrupt it, so its layers close in order
 * (connections drained, the store closed) before the process exits.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type { Effect } from "effect"
import type { LogFormat, LogLevelName } from "../observability/LogNames.js"
import { asCommand } from "./RunEffect.js"

export const runDaemon = (program: Effect.Effect<void, unknown>, logLevel: LogLevelName, logFormat: LogFormat) =>
  // failures are reported by asCommand, on stderr; runMain's own report would go through a logger we do not control
  NodeRuntime.runMain(asCommand(program, logLevel, logFormat), { disableErrorReporting: true, disablePrettyLogger: true })
