/**
 * The `sophia` command line: every command, its flags and help (commander), parsed into the Effect that
 * runs it. Parsing is synchronous and prints nothing but help and the version; every parser error becomes
 * one `sophia: <command>: …` line naming the flag or word at fault, with a "did you mean" where one is
 * close, and an unknown subcommand lists its group's commands. Global flags (`--db`, `--database-url`,
 * `--log-level`, `--log-format`) are accepted before or after the subcommand.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from "commander"
import type { Effect } from "effect"
import { closest } from "../domain/Names.js"
import type { LogFormat, LogLevelName } from "../observability/LogNames.js"
import { LOG_FORMATS, LOG_LEVELS } from "../observability/LogNames.js"
import { VERSION } from "../Version.js"
import type { Globals } from "./Store.js"

/** The SQLite file every command uses unless told (`--db`). */
const DEFAULT_DB = "./.sophia/sophia.db"

/**
 * A command's handler, loaded only when that command runs (so `--version`, `hook` or `watch` never load
 * Effect or the library): an Effect program with the `runEffect` of its own module (in the built CLI each
 * command module is one bundle, with its own copy of Effect: the program and its runner must be the same
 * one), or a plain async function.
 */
export type Handler<O = any> =
  | {
    readonly _tag: "Effect"
    readonly load: () => Promise<{ readonly runEffect: RunEffect; readonly run: (o: O) => Effect.Effect<void, unknown> }>
  }
  | { readonly _tag: "Plain"; readonly load: () => Promise<(o: O) => Promise<void>> }
type RunEffect = typeof import("./RunEffect.js").runEffect

/** An Effect command: `pick` chooses the program from the module `load` imports (which re-exports `runEffect`). */
export const effectful = <M extends { readonly runEffect: RunEffect }, O>(
  load: () => Promise<M>,
  pick: (m: M) => (o: O) => Effect.Effect<void, unknown>
): Handler<O> => ({
  _tag: "Effect",
  load: () => load().then((m) => ({ runEffect: m.runEffect, run: pick(m) }))
})
export const plain = <O>(load: () => Promise<(o: O) => Promise<void>>): Handler<O> => ({ _tag: "Plain", load })

/** What the command line asks for: run a handler, or it was answered (help, version), or it is wrong. */
export type Parsed =
  | {
    readonly _tag: "Run"
    readonly handler: Handler
    readonly options: Record<string, unknown>
    readonly logLevel: LogLevelName
    readonly logFormat: LogFormat
  }
  | { readonly _tag: "Answered" }
  | { readonly _tag: "Refused"; readonly message: string }

type Chosen = { run?: { readonly handler: Handler; readonly options: Record<string, unknown> }; answered?: boolean }

/** A parser error from one command (commander's own errors carry no command). */
class Located extends Error {
  constructor(readonly command: Command, readonly error: CommanderError | UnknownCommand) {
    super(error.message)
  }
}
class UnknownCommand extends Error {}

const pathOf = (command: Command): string => {
  const names: Array<string> = []
  for (let c: Command | null = command; c !== null; c = c.parent) names.unshift(c.name())
  return names.join(" ")
}

const port = (value: string) => {
  const n = Number(value)
  if (!/^\d+$/.test(value) || n > 65535) throw new InvalidArgumentError("must be an integer from 0 to 65535 (0 picks a free port)")
  return n
}

/** A group (or the program): alone it prints its help; an unknown word is refused with its commands listed. */
const groupAction = (chosen: Chosen) =>
  function(this: Command, word: string | undefined) {
    if (word === undefined) {
      this.outputHelp()
      chosen.answered = true
      return
    }
    const names = this.commands.map((c) => c.name()).filter((n) => n !== "help")
    const guess = closest(word, names)
    const hint = guess === undefined ? "" : ` (did you mean ${guess}?)`
    throw new Located(this, new UnknownCommand(`unknown command '${word}'${hint}; its commands: ${names.join(", ")}`))
  }

/** Builds the command tree; `chosen` receives the Effect of the command the line names. */
const program = (chosen: Chosen) => {
  const root = new Command("sophia")
    .description("the shared state layer (MCP server) for fleets of AI agents")
    .version(VERSION, "-v, --version", "print the version")
    .helpOption("-h, --help", "show this help")
    .usage("<command> [flags]")
    .configureHelp(HELP)
    .configureOutput({ outputError: () => undefined })
    .addOption(new Option("--db <path>", "SQLite database file (serve and connection create create it, with its folder)").default(DEFAULT_DB, DEFAULT_DB))
    .addOption(new Option("--database-url <url>", "Postgres URL instead of --db (default: env SOPHIA_DATABASE_URL, else --db)"))
    .addOption(new Option("--log-level <level>", "what reaches the log (stderr)").choices(LOG_LEVELS).default("info"))
    .addOption(
      new Option("--log-format <format>", "log lines on stderr: pretty (for people) or json (one object per line)").choices(LOG_FORMATS)
        .default("pretty")
    )
    .argument("[command]")
    .allowExcessArguments()
    .action(groupAction(chosen))

  /** A leaf command whose handler gets its own options with the globals. */
  const leaf = <O>(parent: Command, name: string, description: string, handler: Handler<O>) => {
    // (a group takes any words, to refuse them itself; a leaf takes only the arguments it declares)
    const command = parent.command(name).description(description).allowExcessArguments(false)
    command.action((...args: Array<unknown>) => {
      const self = args[args.length - 1] as Command
      const positional = Object.fromEntries(self.registeredArguments.map((a, i) => [camel(a.name()), args[i]]))
      chosen.run = { handler, options: { ...self.optsWithGlobals(), ...positional } }
    })
    return command
  }
  const group = (name: string, description: string) =>
    root.command(name).description(description).usage("<command> [flags]").argument("[command]").allowExcessArguments()
      .action(groupAction(chosen))

  const toolNames = () =>
    new Option("--tool-names <style>", "advertise tools as sophia_x (clients that refuse dots) or sophia.x; both are always accepted")
      .choices(["underscore", "dotted"]).default("underscore")
  const user = () => new Option("--user <name>", "user name (default: the owner)")
  const selector = ["<id|name>", "connection id, its first 8 characters, or its name"] as const

  // (each module imported below is one bundle of the built CLI: scripts/build.mjs)
  const owner = <O>(pick: (m: typeof import("./Owner.js")) => (o: O) => Effect.Effect<void, unknown>) =>
    effectful(() => import("./Owner.js"), pick)
  const connections = <O>(pick: (m: typeof import("./Connections.js")) => (o: O) => Effect.Effect<void, unknown>) =>
    effectful(() => import("./Connections.js"), pick)
  const serveCmd = effectful(() => import("./Serve.js"), (m) => m.serve)
  const stdioCmd = effectful(() => import("./Serve.js"), (m) => m.stdio)
  const portalCmd = effectful(() => import("./PortalLink.js"), (m) => m.portal)
  const createCmd = effectful(() => import("./Mint.js"), (m) => m.connectionCreate)
  const revokeCmd = effectful(() => import("./Revoke.js"), (m) => m.connectionRevoke)
  const verifyCmd = effectful(() => import("./LedgerVerify.js"), (m) => m.ledgerVerify)
  const approvalListCmd = effectful(() => import("./ApprovalList.js"), (m) => m.approvalsList)
  const backupCmd = effectful(() => import("./Backup.js"), (m) => m.backup)

  leaf(root, "serve", "run the daemon: Streamable HTTP MCP at /mcp, REST at /api/tools/<tool>, /healthz, /metrics", serveCmd)
    .addOption(new Option("--host <host>", "interface to listen on").default("127.0.0.1"))
    .addOption(new Option("--port <port>", "TCP port (0 picks a free one)").argParser(port).default(7337))
    .addOption(toolNames())
  leaf(root, "stdio", "MCP over stdin/stdout for one connection (bearer from env SOPHIA_BEARER); logs go to stderr", stdioCmd)
    .addOption(toolNames())

  const connection = group("connection", "mint, list, revoke and rename the connections agents use")
  leaf(connection, "create", "mint a connection; prints one JSON object with its bearer (shown once)", createCmd)
    .addOption(new Option("--name <name>", "the agent's name (unique among live connections)").makeOptionMandatory())
    .addOption(
      new Option("--profile <profile>", "observer reads; assistant also coordinates (writes need approval); full also writes")
        .choices(["observer", "assistant", "full"]).makeOptionMandatory()
    )
    .addOption(user())
    .addOption(new Option("--scope <ids>", "entity ids this connection may read, comma-separated (default: all)"))
    .addOption(new Option("--backlog", "start with the channels' history unread (default: caught up; posts to it count)").default(false))
    .addOption(
      new Option("--allow-elicitation", "its own MCP client may approve its plain writes by elicitation (default: the owner decides)")
        .default(false)
    )
  leaf(connection, "list", "list connections (a table; --json for one JSON array, never their bearers)", connections((m) => m.connectionList))
    .addOption(user())
    .addOption(new Option("--json", "one JSON array instead of the table").default(false))
  leaf(connection, "revoke", "revoke a connection; its bearer stops working on the next call", revokeCmd)
    .addOption(user()).argument(...selector)
  leaf(connection, "rename", "rename a connection (past posts show the new name)", connections((m) => m.connectionRename))
    .addOption(user()).argument(...selector).argument("<new-name>", "the new name")

  const ledger = group("ledger", "check the hash-chained work ledger")
  leaf(ledger, "verify", "recompute every ledger hash and state from scratch; JSON report, exit 1 on a break", verifyCmd)

  const approvals = group("approvals", "the owner's decisions on gated calls")
  leaf(approvals, "list", "list approvals waiting for the owner, as JSON", approvalListCmd)
    .addOption(new Option("--all", "decided and executed ones too (default: pending only)").default(false))
  const approvalId = ["<approval-id>", "the approval's id (from approvals list)"] as const
  leaf(approvals, "approve", "approve a pending call; the agent's repeated call (with approval_id) then runs once", owner((m) => m.approvalsDecide("approved")))
    .argument(...approvalId)
  leaf(approvals, "deny", "deny a pending call; the agent's repeated call is refused with approval_denied", owner((m) => m.approvalsDecide("denied")))
    .argument(...approvalId)

  leaf(root, "portal", "print a one-time login link for the owner's portal (10 minutes, one use) on the daemon's address", portalCmd)
    .addOption(new Option("--host <host>", "the daemon's interface (default: where the daemon serving this database listens)"))
    .addOption(new Option("--port <port>", "the daemon's port (default: where the daemon serving this database listens)").argParser(port))
    .addOption(new Option("--logout-all", "end every portal session now").default(false))
  runtimeCommands({ root, leaf, group, user })
  notifyCommands({ root, leaf, group, user })

  leaf(root, "backup", "an online, consistent copy of the SQLite database (safe while the daemon writes)", backupCmd)
    .addOption(new Option("--out <file>", "the new file to write (must not exist)").makeOptionMandatory())

  return root
}

/** What the command groups below are declared with (made by `program` for one parse). */
interface Builders {
  readonly root: Command
  readonly leaf: <O>(parent: Command, name: string, description: string, handler: Handler<O>) => Command
  readonly group: (name: string, description: string) => Command
  readonly user: () => Option
}

/** The commands agent runtimes run: hooks, watch, setup, the git guard (the daemon from --url / SOPHIA_URL). */
const runtimeCommands = ({ group, leaf, root }: Builders) => {
  const url = () => new Option("--url <url>", "the daemon (default: env SOPHIA_URL, else http://127.0.0.1:7337)")
  const hook = group("hook", "agent runtimes' hooks: the hook input on stdin (Codex: its last argument), the output on stdout (bearer from env SOPHIA_BEARER)")
  leaf(hook, "claude-code", "Claude Code's command hook: asks the daemon what this agent should hear now", plain(async () => (await import("./Hook.js")).hookClaudeCode))
    .addOption(url())
  leaf(hook, "codex", "the Codex CLI's notify program: at a turn's end, tells the terminal what is addressed to the agent", plain(async () => (await import("./Hook.js")).hookCodex))
    .addOption(url())
    .argument("[notification]", "the notification Codex passes (JSON)")
  leaf(root, "watch", "wait for posts this connection has not read and print them, a line each (bearer from env SOPHIA_BEARER)", plain(async () => (await import("./Watch.js")).watch))
    .addOption(url())
    .addOption(new Option("--channel <channel>", "only this channel's new posts"))
    .addOption(new Option("--kinds <kinds>", "only these kinds, comma-separated (e.g. question,decision)"))
    .addOption(new Option("--once", "exit after the first posts").default(false))
    .addOption(new Option("--json", "one JSON object per post instead of a line").default(false))
  const setup = group("setup", "connect an agent runtime's project to Sophia in one command")
  leaf(setup, "claude-code", "mint a connection and merge the MCP server and the hooks into a Claude Code project (idempotent)", effectful(() => import("./Setup.js"), (m) => m.setupClaudeCode))
    .addOption(new Option("--name <name>", "the agent's name").makeOptionMandatory())
    .addOption(new Option("--profile <profile>", "its profile").choices(["observer", "assistant", "full"]).makeOptionMandatory())
    .addOption(new Option("--dir <dir>", "the project folder (default: the working folder)"))
    .addOption(new Option("--url <url>", "the daemon (default: env SOPHIA_URL, else the daemon serving this database)"))
    .addOption(new Option("--bearer <bearer>", "use this connection instead of minting one"))
  leaf(setup, "codex", "mint a connection and merge the MCP server and the notify hook into a Codex project's .codex/config.toml (idempotent)", effectful(() => import("./SetupCodex.js"), (m) => m.setupCodex))
    .addOption(new Option("--name <name>", "the agent's name").makeOptionMandatory())
    .addOption(new Option("--profile <profile>", "its profile").choices(["observer", "assistant", "full"]).makeOptionMandatory())
    .addOption(new Option("--dir <dir>", "the project folder (default: the working folder)"))
    .addOption(new Option("--url <url>", "the daemon (default: env SOPHIA_URL, else the daemon serving this database)"))
    .addOption(new Option("--bearer <bearer>", "use this connection instead of minting one"))

  const guard = group("guard", "leases enforced at commit time: a git pre-commit hook (bearer from env SOPHIA_BEARER)")
  const project = () => new Option("--project <project>", "the leases' project (default: default)")
  leaf(guard, "install", "install the pre-commit hook that runs guard check (an existing hook is kept and runs first)", plain(async () => (await import("./Guard.js")).guardInstall))
    .addOption(new Option("--dir <dir>", "the repository (default: the working folder)"))
    .addOption(project())
    .addOption(url())
  leaf(guard, "check", "exit 1, a line per conflict, when a staged path lies in an exclusive lease of another connection", plain(async () => (await import("./Guard.js")).guardCheck))
    .addOption(project())
    .addOption(url())
}

/** The owner's notification targets (`notify add|list|remove|test`). */
const notifyCommands = ({ group, leaf, user }: Builders) => {
  const notify = <O>(pick: (m: typeof import("./Notify.js")) => (o: O) => Effect.Effect<void, unknown>) =>
    effectful(() => import("./Notify.js"), pick)
  const notifications = group("notify", "reach the owner outside the portal: webhooks, chat, phone push")
  leaf(notifications, "add", "add a target; prints its id", notify((m) => m.notifyAdd))
    .addOption(
      new Option("--url <url>", "where to POST (an http:// or https:// URL: a Slack incoming webhook, an ntfy topic, your receiver)")
        .makeOptionMandatory()
    )
    .addOption(
      new Option("--events <events>", "comma-separated: approval_requested, approval_decided, wait_ended, orphan, connection_revoked")
        .makeOptionMandatory()
    )
    .addOption(
      new Option("--format <format>", "json (the contract's body), slack ({ text }) or ntfy (plain text, Title and Click headers)")
        .choices(["json", "slack", "ntfy"]).default("json")
    )
    .addOption(new Option("--secret <secret>", "sign each POST: Sophia-Signature t=<unix s>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">"))
    .addOption(user())
  leaf(notifications, "list", "list the targets (a table; --json for one JSON array; secrets never shown)", notify((m) => m.notifyList))
    .addOption(user())
    .addOption(new Option("--json", "one JSON array instead of the table").default(false))
  leaf(notifications, "remove", "remove a target and its queued notifications", notify((m) => m.notifyRemove))
    .addOption(user()).argument("<id>", "the target's id (from notify list)")
  leaf(notifications, "test", "queue a test notification to a target; the serving daemon sends it", notify((m) => m.notifyTest))
    .addOption(user()).argument("<id>", "the target's id (from notify list)")
}

/** The handler's key for a positional argument: `<id|name>` is the selector, others camel-cased. */
const camel = (name: string) => (name === "id|name" ? "selector" : name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase()))

/** Every command reports its own errors as `Located`, so the message can name it. */
const locateErrors = (command: Command): void => {
  command.exitOverride((error) => {
    throw new Located(command, error)
  })
  command.commands.forEach(locateErrors)
}

/**
 * commander's messages as one line that names the flag first: "error: option '--port <port>' argument
 * 'abc' is invalid. …" → "--port 'abc' is invalid: …"; "(Did you mean …?)" → "; did you mean …?".
 */
const oneLine = (message: string) =>
  message
    .replace(/^error: /, "")
    .replace(/^option '(-[\w-]+)[^']*' argument '(.*)' is invalid\. (?:Allowed choices are (.*)\.|(.*))$/s, (_, flag, value, choices, why) =>
      `${flag} '${value}' is invalid: ${choices === undefined ? why : `must be one of ${choices}`}`)
    .replace(/^required option '(-[\w-]+)[^']*' not specified$/, "$1 is required")
    .replace(/^option '(-[\w-]+)[^']*' argument missing$/, "$1 needs a value")
    .replace(/\s*\n\(Did you mean (.*)\)\s*$/s, "; did you mean $1")
    .replace(/\s*\n\s*/g, " ")
    .trim()

/** Help as people read it: defaults and choices in words, globals listed without -h/-v. */
const HELP = {
  showGlobalOptions: true,
  helpWidth: 110,
  optionDescription: (option: Option) => {
    const extra = [
      ...(option.argChoices ? [`one of: ${option.argChoices.join(", ")}`] : []),
      ...(option.defaultValue !== undefined && option.defaultValue !== false
        ? [`default: ${option.defaultValueDescription ?? String(option.defaultValue)}`]
        : [])
    ]
    return extra.length === 0 ? option.description : `${option.description} (${extra.join("; ")})`
  },
  visibleGlobalOptions: (command: Command) => {
    const globals: Array<Option> = []
    for (let c = command.parent; c !== null; c = c.parent) globals.push(...c.options.filter((o) => o.long !== "--version"))
    return globals
  }
}

/** The command line (`process.argv`) as what to do. */
export const parseCommandLine = (argv: ReadonlyArray<string>): Parsed => {
  const chosen: Chosen = {}
  const root = program(chosen)
  locateErrors(root)
  try {
    root.parse([...argv], { from: "node" })
  } catch (e) {
    if (!(e instanceof Located)) throw e
    const error = e.error
    // help and the version were printed (stdout); nothing else to do
    if (error instanceof CommanderError && (error.exitCode === 0 || error.code === "commander.helpDisplayed")) return { _tag: "Answered" }
    const where = pathOf(e.command).replace(/^sophia ?/, "")
    return { _tag: "Refused", message: `${where === "" ? "" : `${where}: `}${oneLine(error.message)}` }
  }
  if (chosen.run === undefined) return { _tag: "Answered" }
  const globals = root.opts<Globals & { logLevel: LogLevelName; logFormat: LogFormat }>()
  return { _tag: "Run", ...chosen.run, logLevel: globals.logLevel, logFormat: globals.logFormat }
}
