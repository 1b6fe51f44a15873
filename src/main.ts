/**
 * The `sophia` CLI: `serve` (the daemon), `stdio` (MCP over stdio for one bearer) and the owner's
 * commands. Every command takes the global flags `--db` / `--database-url`, `--log-level` and
 * `--log-format`, before or after the subcommand. Expected failures are one line on stderr and exit 1.
 *
 * Shape: each subcommand is one self-contained block below (options, description, handler); the list
 * `commands` at the end names them. Heavy modules (the app, the MCP transports) are imported inside the
 * handlers, so a command loads only what it runs.
 */
import { Args, Command, Options } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Config, Console, Effect, Layer, Logger, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { normalizeArgv } from "./cli/Argv.js"
import { cliConsole, report } from "./cli/Output.js"
import type { StoreChoice } from "./layers/App.js"
import type { LogFormat } from "./observability/Logging.js"
import { LOG_FORMATS, loggerLayer, logLevelOf } from "./observability/Logging.js"
import { VERSION } from "./Version.js"

// ---------------------------------------------------------------------------------------------------
// shared pieces

/** An expected CLI failure: printed as `sophia: <message>`, exit 1. */
class CliFailure extends Schema.TaggedError<CliFailure>()("CliFailure", { message: Schema.String }) {}

const DEFAULT_DB = "./.sophia/sophia.db"

/** `Options.withDefault` plus the default in the help text (@effect/cli does not print plain defaults). */
const withDefault = <A>(value: NoInfer<A>, shown: string = JSON.stringify(value)) => (self: Options.Options<A>): Options.Options<A> =>
  self.pipe(Options.withDescription(`(default: ${shown})`), Options.withDefault(value))

/** The global flags every command accepts (declared on each command, so each help lists them). */
const globals = {
  db: Options.text("db").pipe(
    Options.withDescription("SQLite database file (serve and connection create create it, with its folder)"),
    withDefault(DEFAULT_DB, DEFAULT_DB)
  ),
  databaseUrl: Options.text("database-url").pipe(
    Options.withDescription("Postgres URL instead of --db (default: env SOPHIA_DATABASE_URL, else --db)"),
    Options.optional
  ),
  logFormat: Options.choice("log-format", LOG_FORMATS).pipe(
    Options.withDescription("log lines on stderr: pretty (for people) or json (one object per line)"),
    withDefault<LogFormat>("pretty", "pretty")
  )
}
type Globals = { readonly db: string; readonly databaseUrl: Option.Option<string> }

const toolNames = Options.choice("tool-names", ["underscore", "dotted"]).pipe(
  Options.withDescription("advertise tools as sophia_x (clients that refuse dots) or sophia.x; both are always accepted"),
  withDefault<"underscore" | "dotted">("underscore", "underscore")
)
const user = Options.text("user").pipe(Options.withDescription("user name (default: the owner)"), Options.optional)

/** The store: `--database-url`, else env SOPHIA_DATABASE_URL, else the SQLite file `--db`. */
const storeOf = (g: Globals) =>
  Effect.gen(function*() {
    const env = yield* Config.option(Config.string("SOPHIA_DATABASE_URL")).pipe(Effect.orDie)
    const url = Option.orElse(g.databaseUrl, () => env).pipe(Option.filter((u) => u.trim() !== ""))
    return Option.match(url, {
      onNone: (): StoreChoice => ({ filename: path.resolve(g.db) }),
      onSome: (u): StoreChoice => ({ url: u })
    })
  })

/** For commands that only read or change an existing graph: refuse a missing database, create nothing. */
const existingStoreOf = (g: Globals): Effect.Effect<StoreChoice, CliFailure> =>
  Effect.flatMap(storeOf(g), (store): Effect.Effect<StoreChoice, CliFailure> => {
    if ("url" in store) return Effect.succeed(store)
    if (!fs.existsSync(store.filename)) {
      return Effect.fail(
        new CliFailure({
          message: `no database at ${store.filename} (nothing was created); pass --db with the path the daemon uses`
        })
      )
    }
    if (fs.statSync(store.filename).isDirectory()) {
      return Effect.fail(new CliFailure({ message: `${store.filename} is a directory, not a database file` }))
    }
    return Effect.succeed(store)
  })

/** The library (services and layers), loaded when a command needs it. */
type Lib = typeof import("./index.js")
const loadApp = Effect.promise((): Promise<Lib> => import("./index.js"))
type AppServices = Layer.Layer.Success<ReturnType<Lib["SophiaOn"]>>

const printJson = (value: unknown) => Console.log(JSON.stringify(value))

/** Run `f` with the services over the store (typed refusals and store failures reach the reporter). */
const withServices = <A, E>(store: StoreChoice, f: (lib: Lib) => Effect.Effect<A, E, AppServices>) =>
  Effect.flatMap(loadApp, (lib) => Effect.provide(f(lib), lib.SophiaOn(store)))

const checkPort = (port: number) =>
  Number.isInteger(port) && port >= 0 && port <= 65535
    ? Effect.void
    : Effect.fail(new CliFailure({ message: `--port must be an integer from 0 to 65535 (0 picks a free port); got ${port}` }))

/** The path of this bin, absolute (so printed commands work from any folder). */
const binPath = () => {
  const script = process.argv[1] ?? "sophia"
  try {
    // the package's bin/sophia.js (the bundled entry under dist/cli is loaded by it)
    const real = fs.realpathSync(script)
    const bin = path.resolve(path.dirname(real), "../../bin/sophia.js")
    return real.includes(`${path.sep}dist${path.sep}`) && fs.existsSync(bin) ? bin : real
  } catch {
    return script
  }
}

const shellQuote = (s: string) => (/^[A-Za-z0-9_/.:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`)

/** The banner's ready-made client entries: Streamable HTTP and stdio, JSON and `claude mcp add`. */
export const clientEntries = (options: { readonly url: string; readonly bearer: string; readonly db: string; readonly bin: string }) => {
  const { bearer, bin, db, url } = options
  const node = process.execPath
  const indent = (json: unknown) => JSON.stringify(json, null, 2).split("\n").map((l) => "    " + l).join("\n")
  return [
    `  Streamable HTTP (the daemon must be running):`,
    `    claude mcp add --transport http sophia ${url} --header "Authorization: Bearer ${bearer}"`,
    indent({ mcpServers: { sophia: { type: "http", url, headers: { Authorization: `Bearer ${bearer}` } } } }),
    `  stdio (the client starts its own process on the same database; works from any folder):`,
    `    claude mcp add sophia --env SOPHIA_BEARER=${bearer} -- ${shellQuote(node)} ${shellQuote(bin)} stdio --db ${shellQuote(db)}`,
    indent({ mcpServers: { sophia: { command: node, args: [bin, "stdio", "--db", db], env: { SOPHIA_BEARER: bearer } } } })
  ].join("\n")
}

// ---------------------------------------------------------------------------------------------------
// sophia serve

const serve = Command.make(
  "serve",
  {
    ...globals,
    host: Options.text("host").pipe(Options.withDescription("interface to listen on"), withDefault("127.0.0.1", "127.0.0.1")),
    port: Options.integer("port").pipe(Options.withDescription("TCP port (0 picks a free one)"), withDefault(7337)),
    toolNames
  },
  (o) =>
    Effect.gen(function*() {
      yield* checkPort(o.port)
      const store = yield* storeOf(o)
      const [app, { HttpServer }, { Auth }, { TracingLive }] = yield* Effect.promise(() =>
        Promise.all([
          import("./index.js"),
          import("./mcp/Http.js"),
          import("./services/Auth.js"),
          import("./observability/Tracing.js")
        ])
      )
      const where = "url" in store ? "Postgres" : store.filename
      const banner = Layer.effectDiscard(Effect.gen(function*() {
        const auth = yield* Auth
        const http = yield* HttpServer
        const minted = yield* auth.bootstrapOwner()
        // first start: the owner's portal login link too (one use, 10 minutes; `sophia portal` mints more)
        const portalLink = Option.isSome(minted)
          ? `${http.baseUrl}/portal/login?token=${(yield* (yield* app.Portal).mintLogin()).token}`
          : undefined
        const bin = binPath()
        const dbFlag = "url" in store ? "--database-url <url>" : `--db ${shellQuote(store.filename)}`
        const ready = `Sophia ${VERSION} listening; MCP endpoint ${http.mcpUrl} (database ${where}; pid ${process.pid})`
        // one write, so a reader that saw the endpoint line has the bearer too
        yield* Console.log(Option.match(minted, {
          onNone: () => ready,
          onSome: ({ bearer, name }) =>
            [
              ready,
              ``,
              `First start: created the owner and a first full connection "${name}".`,
              `Its bearer is shown once, now; store it:`,
              ``,
              `    ${bearer}`,
              ``,
              clientEntries({ url: http.mcpUrl, bearer, db: "url" in store ? "<url>" : store.filename, bin }),
              ``,
              `Mint more:  ${shellQuote(process.execPath)} ${shellQuote(bin)} connection create --name <agent> --profile observer|assistant|full ${dbFlag}`,
              `Approvals:  ${shellQuote(process.execPath)} ${shellQuote(bin)} approvals list ${dbFlag}`,
              `Stop:       Ctrl-C, or kill ${process.pid} (SIGTERM); metrics at ${http.baseUrl}/metrics`,
              ``,
              `The owner's portal (this link logs you in once, within 10 minutes; \`sophia portal\` prints a new one):`,
              `    ${portalLink}`,
              ``
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
).pipe(Command.withDescription("run the daemon: Streamable HTTP MCP at /mcp, REST at /api/tools/<tool>, /healthz, /metrics"))

// ---------------------------------------------------------------------------------------------------
// sophia stdio

const stdio = Command.make("stdio", { ...globals, toolNames }, (o) =>
  Effect.gen(function*() {
    const bearer = yield* Config.redacted("SOPHIA_BEARER").pipe(
      Effect.mapError(() =>
        new CliFailure({ message: "set SOPHIA_BEARER to the bearer of the connection this stdio server speaks for" })
      )
    )
    const store = yield* existingStoreOf(o)
    const [app, { serveStdio }, { TracingLive }] = yield* Effect.promise(() =>
      Promise.all([import("./index.js"), import("./mcp/Stdio.js"), import("./observability/Tracing.js")])
    )
    yield* serveStdio(bearer, o.toolNames).pipe(
      Effect.catchTag("Unauthenticated", (e) => Effect.fail(new CliFailure({ message: `SOPHIA_BEARER: ${e.message}` }))),
      Effect.provide(app.DaemonLive(store).pipe(Layer.provide(TracingLive({ name: "sophia", version: VERSION }))))
    )
  })).pipe(Command.withDescription("MCP over stdin/stdout for one connection (bearer from env SOPHIA_BEARER); logs go to stderr"))

// ---------------------------------------------------------------------------------------------------
// sophia connection create|list|revoke|rename

const create = Command.make(
  "create",
  {
    ...globals,
    name: Options.text("name").pipe(Options.withDescription("the agent's name (unique among live connections)")),
    profile: Options.choice("profile", ["observer", "assistant", "full"] as const).pipe(
      Options.withDescription("observer reads; assistant also coordinates (writes need approval); full also writes")
    ),
    user,
    scope: Options.text("scope").pipe(
      Options.withDescription("entity ids this connection may read, comma-separated (default: all)"),
      Options.optional
    )
  },
  (o) =>
    Effect.gen(function*() {
      const store = yield* storeOf(o)
      const m = yield* withServices(store, (app) =>
        Effect.flatMap(app.Auth, (auth) =>
          auth.createConnection({
            name: o.name,
            profile: o.profile,
            user: Option.getOrUndefined(o.user),
            scope: Option.match(o.scope, {
              onNone: () => [],
              onSome: (s) => s.split(",").map((x) => x.trim()).filter((x) => x.length > 0)
            })
          })))
      yield* printJson({ connection_id: m.connection_id, name: m.name, profile: m.profile, user_id: m.user_id, bearer: m.bearer })
    })
).pipe(Command.withDescription("mint a connection; prints one JSON object with its bearer (shown once)"))

const list = Command.make("list", { ...globals, user }, (o) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, (app) => Effect.flatMap(app.Auth, (auth) => auth.list(Option.getOrUndefined(o.user)))).pipe(
      Effect.flatMap(printJson)
    ))).pipe(Command.withDescription("list connections as JSON (never their bearers)"))

const selector = Args.text({ name: "id|name" }).pipe(Args.withDescription("connection id, its first 8 characters, or its name"))

const revoke = Command.make("revoke", { ...globals, user, selector }, (o) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, (app) => Effect.flatMap(app.Auth, (auth) => auth.revoke(o.selector, Option.getOrUndefined(o.user))))
      .pipe(Effect.flatMap(printJson)))).pipe(Command.withDescription("revoke a connection; its bearer stops working on the next call"))

const rename = Command.make(
  "rename",
  { ...globals, user, selector, newName: Args.text({ name: "new-name" }).pipe(Args.withDescription("the new name")) },
  (o) =>
    Effect.flatMap(existingStoreOf(o), (store) =>
      withServices(store, (app) =>
        Effect.flatMap(app.Auth, (auth) => auth.rename(o.selector, o.newName, Option.getOrUndefined(o.user)))).pipe(
          Effect.flatMap(printJson)
        ))
).pipe(Command.withDescription("rename a connection (past posts show the new name)"))

const connection = Command.make("connection").pipe(
  Command.withDescription("mint, list, revoke and rename the connections agents use"),
  Command.withSubcommands([create, list, revoke, rename])
)

// ---------------------------------------------------------------------------------------------------
// sophia ledger verify

const ledgerVerify = Command.make("verify", { ...globals }, (o) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const report = yield* withServices(store, (app) => Effect.flatMap(app.Ledger, (ledger) => ledger.verify()))
    yield* printJson(report)
    if (!report.ok) {
      const b = report.first_break!
      return yield* new CliFailure({ message: `ledger broken: ${b.work_id} seq ${b.seq}: ${b.reason}` })
    }
  })).pipe(Command.withDescription("recompute every ledger hash and state from scratch; JSON report, exit 1 on a break"))

const ledger = Command.make("ledger").pipe(
  Command.withDescription("check the hash-chained work ledger"),
  Command.withSubcommands([ledgerVerify])
)

// ---------------------------------------------------------------------------------------------------
// sophia approvals list|approve|deny

const approvalsList = Command.make(
  "list",
  { ...globals, all: Options.boolean("all").pipe(Options.withDescription("decided and executed ones too (default: pending only)")) },
  (o) =>
    Effect.flatMap(existingStoreOf(o), (store) =>
      withServices(store, (app) => Effect.flatMap(app.Approvals, (a) => a.list({ all: o.all }))).pipe(Effect.flatMap(printJson)))
).pipe(Command.withDescription("list approvals waiting for the owner, as JSON"))

const approvalId = Args.text({ name: "approval-id" }).pipe(Args.withDescription("the approval's id (from approvals list)"))
const decide = (decision: "approved" | "denied") => (o: Globals & { readonly approvalId: string }) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, (app) => Effect.flatMap(app.Approvals, (a) => a.decide(o.approvalId, decision))).pipe(
      Effect.flatMap(printJson)
    ))
const approvalsApprove = Command.make("approve", { ...globals, approvalId }, decide("approved")).pipe(
  Command.withDescription("approve a pending call; the agent's repeated call (with approval_id) then runs once")
)
const approvalsDeny = Command.make("deny", { ...globals, approvalId }, decide("denied")).pipe(
  Command.withDescription("deny a pending call; the agent's repeated call is refused with approval_denied")
)

const approvals = Command.make("approvals").pipe(
  Command.withDescription("the owner's decisions on gated calls"),
  Command.withSubcommands([approvalsList, approvalsApprove, approvalsDeny])
)

// ---------------------------------------------------------------------------------------------------
// sophia backup --out FILE

const backup = Command.make(
  "backup",
  { ...globals, out: Options.text("out").pipe(Options.withDescription("the new file to write (must not exist)")) },
  (o) =>
    Effect.gen(function*() {
      const store = yield* existingStoreOf(o)
      if ("url" in store) {
        return yield* new CliFailure({ message: "backup copies a SQLite file; for Postgres use pg_dump" })
      }
      const app = yield* loadApp
      yield* printJson(yield* app.backupSqlite(store.filename, o.out))
    })
).pipe(Command.withDescription("an online, consistent copy of the SQLite database (safe while the daemon writes)"))

// ---------------------------------------------------------------------------------------------------
// sophia portal [--logout-all]

/**
 * `sophia portal`: a one-time login link for the owner's portal (valid 10 minutes, one use), printed as the
 * last stdout line; `--logout-all` ends every portal session first.
 */
const portal = Command.make(
  "portal",
  {
    ...globals,
    host: Options.text("host").pipe(Options.withDescription("the daemon's interface (for the link)"), withDefault("127.0.0.1", "127.0.0.1")),
    port: Options.integer("port").pipe(Options.withDescription("the daemon's port (for the link)"), withDefault(7337)),
    logoutAll: Options.boolean("logout-all").pipe(Options.withDescription("end every portal session now"))
  },
  (o) =>
    Effect.gen(function*() {
      yield* checkPort(o.port)
      const store = yield* existingStoreOf(o)
      const login = yield* withServices(store, (app) =>
        Effect.gen(function*() {
          const service = yield* app.Portal
          if (o.logoutAll) yield* Console.log(`logged out ${yield* service.logoutAll()} portal session(s)`)
          return yield* service.mintLogin()
        }))
      const hostForUrl = o.host.includes(":") ? `[${o.host}]` : o.host === "0.0.0.0" ? "127.0.0.1" : o.host
      yield* Console.log(`http://${hostForUrl}:${o.port}/portal/login?token=${login.token}`)
    })
).pipe(Command.withDescription("print a one-time login link for the owner's portal (10 minutes, one use)"))

// ---------------------------------------------------------------------------------------------------
// the command list (a new subcommand: one block above, one entry here; a new group also in cli/Argv.ts's GROUPS)

const commands = [serve, stdio, connection, ledger, approvals, portal, backup] as const

const sophia = Command.make("sophia").pipe(
  Command.withDescription("the shared state layer (MCP server) for fleets of AI agents"),
  Command.withSubcommands(commands)
)

const cli = Command.run(sophia, { name: "sophia", version: VERSION })

// ---------------------------------------------------------------------------------------------------
// run: the argv normalised (cli/Argv.ts), output and failures as cli/Output.ts writes them

const parsed = normalizeArgv(process.argv)

if (parsed.error !== undefined) {
  process.stderr.write(`sophia: ${parsed.error}\n`)
  process.exitCode = 1
} else {
  const debug = ["all", "trace", "debug"].includes(parsed.logLevel)
  Effect.suspend(() => cli(parsed.args)).pipe(
    Effect.catchAllCause((cause) => report(cause, debug)),
    Effect.provide(Layer.mergeAll(NodeContext.layer, loggerLayer(parsed.logFormat))),
    Logger.withMinimumLogLevel(logLevelOf(parsed.logLevel)),
    Effect.withConsole(cliConsole(Effect.runSync(Console.consoleWith(Effect.succeed)))),
    // failures are reported above, on stderr; runMain's own report would go through a logger we do not control
    NodeRuntime.runMain({ disableErrorReporting: true, disablePrettyLogger: true })
  )
}
