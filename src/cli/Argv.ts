/**
 * The `sophia` command line as the CLI library is handed it: global flags anywhere, `--log-level` taken
 * out, bare groups print help. Pure (no I/O), so main.ts stays the wiring of commands.
 */
import type { LogFormat, LogLevelName } from "../observability/Logging.js"
import { LOG_FORMATS, LOG_LEVELS } from "../observability/Logging.js"

/** The commands that only group others (main.ts's `connection`, `ledger`, `approvals`): alone, they print their help. */
export const GROUPS: ReadonlySet<string> = new Set(["connection", "ledger", "approvals"])

const GLOBAL_FLAGS = new Set(["--db", "--database-url", "--log-format"])

export interface ParsedArgv {
  readonly args: ReadonlyArray<string>
  readonly logLevel: LogLevelName
  readonly logFormat: LogFormat
  readonly error?: string
}

/**
 * Global flags given before the subcommand move after it (each command declares them); `--log-level`
 * is taken out wherever it is (the CLI library only accepts it first); a bare `sophia` or group gets
 * `--help`.
 */
export const normalizeArgv = (argv: ReadonlyArray<string>): ParsedArgv => {
  const [runtime = "node", script = "sophia", ...rest] = argv
  const kept: Array<string> = []
  const moved: Array<string> = []
  let logLevel: LogLevelName = "info"
  let logFormat: LogFormat = "pretty"
  let error: string | undefined
  let commandSeen = false
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!
    if (arg === "--") {
      kept.push(...rest.slice(i))
      break
    }
    const eq = arg.startsWith("--") ? arg.indexOf("=") : -1
    const flag = eq > 0 ? arg.slice(0, eq) : arg
    const inline = eq > 0 ? arg.slice(eq + 1) : undefined
    if (flag === "--log-level") {
      const value = inline ?? rest[++i]
      if (value !== undefined && (LOG_LEVELS as ReadonlyArray<string>).includes(value)) logLevel = value as LogLevelName
      else error = `--log-level must be one of ${LOG_LEVELS.join(", ")}; got ${value ?? "nothing"}`
      continue
    }
    if (GLOBAL_FLAGS.has(flag)) {
      const value = inline ?? rest[i + 1]
      if (flag === "--log-format" && value !== undefined && (LOG_FORMATS as ReadonlyArray<string>).includes(value)) {
        logFormat = value as LogFormat
      }
      const target = commandSeen ? kept : moved
      target.push(arg)
      if (inline === undefined && i + 1 < rest.length) target.push(rest[++i]!)
      continue
    }
    if (!arg.startsWith("-")) commandSeen = true
    kept.push(arg)
  }
  const words = kept.filter((a) => !a.startsWith("-"))
  const builtIn = kept.some((a) => a === "--help" || a === "-h" || a === "--version" || a === "--wizard" || a === "--completions")
  const bare = !builtIn && (words.length === 0 || (words.length === 1 && GROUPS.has(words[0]!)))
  const args = [runtime, script, ...kept, ...(bare ? ["--help"] : moved)]
  return error === undefined ? { args, logLevel, logFormat } : { args, logLevel, logFormat, error }
}
