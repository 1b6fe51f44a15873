#!/usr/bin/env node
/**
 * The `sophia` CLI: `serve` (the daemon), `stdio` (MCP over stdio for one bearer) and the owner's
 * commands (`connection …`). Every command takes `--db`.
 */
import { Args, Command, Options, ValidationError as CliValidationError } from "@effect/cli"
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Cause, Config, Console, Effect, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { PROFILES } from "./domain/Auth.js"
import { DaemonLive, ServeLive, SophiaLive } from "./layers/App.js"
import { HttpServer } from "./mcp/Http.js"
import { SERVER_INFO } from "./mcp/McpServer.js"
import type { ToolNaming } from "./mcp/Registry.js"
import { serveStdio } from "./mcp/Stdio.js"
import { Approvals } from "./services/Approvals.js"
import { Auth } from "./services/Auth.js"
import type { MintedConnection } from "./services/Auth.js"
import { Ledger } from "./services/Ledger.js"
import { Portal } from "./services/Portal.js"
import * as fs from "node:fs"

const db = Options.file("db").pipe(
  Options.withDefault("./.sophia/sophia.db"),
  Options.withDescription("SQLite database file (created with its folder)")
)
const toolNames = Options.choice("tool-names", ["underscore", "dotted"]).pipe(
  Options.withDefault("underscore" as const),
  Options.withDescription("advertise tools as sophia_x (default; clients that refuse dots) or sophia.x")
)
const user = Options.text("user").pipe(Options.optional, Options.withDescription("user name (default: the owner)"))

/** Postgres is selected by SOPHIA_DATABASE_URL; until its layer lands, say so rather than silently using SQLite. */
const refusePostgres = Effect.gen(function*() {
  const url = yield* Config.option(Config.redacted("SOPHIA_DATABASE_URL"))
  if (Option.isSome(url) && Redacted.value(url.value).trim() !== "") {
    return yield* Effect.fail(
      new Error("SOPHIA_DATABASE_URL is set, but the Postgres layer is not built yet; unset it to use SQLite (--db)")
    )
  }
})

const clientConfig = (url: string, bearer: string) =>
  [
    `  Claude Code:`,
    `    claude mcp add --transport http sophia ${url} --header "Authorization: Bearer ${bearer}"`,
    `  Claude Desktop, Cursor or any Streamable HTTP client (mcpServers entry):`,
    JSON.stringify({ mcpServers: { sophia: { type: "http", url, headers: { Authorization: `Bearer ${bearer}` } } } }, null, 2)
      .split("\n").map((l) => "    " + l).join("\n"),
    `  stdio clients:`,
    `    SOPHIA_BEARER=${bearer} npx sophia stdio --db <same db>`
  ].join("\n")

const serve = Command.make(
  "serve",
  {
    host: Options.text("host").pipe(Options.withDefault("127.0.0.1")),
    port: Options.integer("port").pipe(Options.withDefault(7337)),
    db,
    toolNames
  },
  ({ db, host, port, toolNames }) =>
    Effect.gen(function*() {
      yield* refusePostgres
      yield* Layer.launch(
        Layer.effectDiscard(Effect.gen(function*() {
          const auth = yield* Auth
          const http = yield* HttpServer
          const minted = yield* auth.bootstrapOwner()
          // first start: the owner's portal login link too (one use, 10 minutes; `sophia portal` mints more)
          const portalLink = Option.isSome(minted)
            ? `${http.baseUrl}/portal/login?token=${(yield* (yield* Portal).mintLogin()).token}`
            : undefined
          const ready = `Sophia ${SERVER_INFO.version} listening; MCP endpoint ${http.mcpUrl} (database ${db})`
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
                clientConfig(http.mcpUrl, bearer),
                ``,
                `Mint more: npx sophia connection create --name <agent> --profile observer|assistant|full --db ${db}`,
                ``,
                `The owner's portal (this link logs you in once, within 10 minutes; \`sophia portal\` prints a new one):`,
                `    ${portalLink}`,
                ``
              ].join("\n")
          }))
        })).pipe(Layer.provideMerge(ServeLive({ filename: db, host, port, naming: toolNames as ToolNaming })))
      )
    })
)

const stdio = Command.make("stdio", { db, toolNames }, ({ db, toolNames }) =>
  Effect.gen(function*() {
    yield* refusePostgres
    const bearer = yield* Config.redacted("SOPHIA_BEARER").pipe(
      Effect.mapError(() => new Error("set SOPHIA_BEARER to the bearer of the connection this stdio server speaks for"))
    )
    yield* serveStdio(bearer, toolNames as ToolNaming).pipe(
      Effect.catchTag("Unauthenticated", (e) => Effect.fail(new Error(`SOPHIA_BEARER: ${e.message}`))),
      Effect.provide(DaemonLive(db))
    )
  }))

const printJson = (value: unknown) => Console.log(JSON.stringify(value))

/** CLI refusals are printed as one line on stderr with a non-zero exit. */
const withAuth = <A, E>(dbPath: string, f: (auth: Auth) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    yield* refusePostgres
    const auth = yield* Auth
    return yield* f(auth)
  }).pipe(Effect.provide(SophiaLive(dbPath)))

const create = Command.make(
  "create",
  {
    name: Options.text("name"),
    profile: Options.choice("profile", PROFILES),
    user,
    scope: Options.text("scope").pipe(Options.optional, Options.withDescription("entity ids, comma-separated")),
    db
  },
  ({ db, name, profile, scope, user }) =>
    withAuth(db, (auth) =>
      auth.createConnection({
        name,
        profile,
        user: Option.getOrUndefined(user),
        scope: Option.match(scope, {
          onNone: () => [],
          onSome: (s) => s.split(",").map((x) => x.trim()).filter((x) => x.length > 0)
        })
      })).pipe(
        Effect.flatMap((m: MintedConnection) =>
          printJson({ connection_id: m.connection_id, name: m.name, profile: m.profile, user_id: m.user_id, bearer: m.bearer })
        )
      )
)

const list = Command.make("list", { db, user }, ({ db, user }) =>
  withAuth(db, (auth) => auth.list(Option.getOrUndefined(user))).pipe(Effect.flatMap(printJson)))

const selector = Args.text({ name: "id|name" })

const revoke = Command.make("revoke", { db, user, selector }, ({ db, selector, user }) =>
  withAuth(db, (auth) => auth.revoke(selector, Option.getOrUndefined(user))).pipe(Effect.flatMap(printJson)))

const rename = Command.make(
  "rename",
  { db, user, selector, newName: Args.text({ name: "new-name" }) },
  ({ db, newName, selector, user }) =>
    withAuth(db, (auth) => auth.rename(selector, newName, Option.getOrUndefined(user))).pipe(Effect.flatMap(printJson))
)

const connection = Command.make("connection").pipe(Command.withSubcommands([create, list, revoke, rename]))

/** `sophia ledger verify`: recompute every hash and state from scratch; JSON report, non-zero exit on a break. */
const ledgerVerify = Command.make("verify", { db }, ({ db }) =>
  Effect.gen(function*() {
    yield* refusePostgres
    const report = yield* (yield* Ledger).verify()
    yield* printJson(report)
    if (!report.ok) {
      const b = report.first_break!
      return yield* Effect.fail(new Error(`ledger broken: ${b.work_id} seq ${b.seq}: ${b.reason}`))
    }
  }).pipe(Effect.provide(SophiaLive(db))))

const ledger = Command.make("ledger").pipe(Command.withSubcommands([ledgerVerify]))

/** The owner's channel for approvals (elevated calls are approved only here, or later in the portal). */
const withApprovals = <A, E>(dbPath: string, f: (approvals: Approvals) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    yield* refusePostgres
    return yield* f(yield* Approvals)
  }).pipe(Effect.provide(SophiaLive(dbPath)))

const approvalsList = Command.make(
  "list",
  { db, all: Options.boolean("all").pipe(Options.withDescription("decided and executed ones too")) },
  ({ all, db }) => withApprovals(db, (approvals) => approvals.list({ all })).pipe(Effect.flatMap(printJson))
)
const approvalId = Args.text({ name: "approval-id" })
const approvalsApprove = Command.make("approve", { db, approvalId }, ({ approvalId, db }) =>
  withApprovals(db, (approvals) => approvals.decide(approvalId, "approved")).pipe(Effect.flatMap(printJson)))
const approvalsDeny = Command.make("deny", { db, approvalId }, ({ approvalId, db }) =>
  withApprovals(db, (approvals) => approvals.decide(approvalId, "denied")).pipe(Effect.flatMap(printJson)))

const approvals = Command.make("approvals").pipe(Command.withSubcommands([approvalsList, approvalsApprove, approvalsDeny]))

/**
 * `sophia portal`: a one-time login link for the owner's portal (valid 10 minutes, one use), printed as the
 * last stdout line; `--logout-all` ends every portal session first.
 */
const portal = Command.make(
  "portal",
  {
    db,
    host: Options.text("host").pipe(Options.withDefault("127.0.0.1")),
    port: Options.integer("port").pipe(Options.withDefault(7337)),
    logoutAll: Options.boolean("logout-all").pipe(Options.withDescription("end every portal session now"))
  },
  ({ db, host, logoutAll, port }) =>
    Effect.gen(function*() {
      yield* refusePostgres
      if (!fs.existsSync(db)) return yield* Effect.fail(new Error(`no database at ${db}`))
      const service = yield* Portal
      if (logoutAll) yield* Console.log(`logged out ${yield* service.logoutAll()} portal session(s)`)
      const login = yield* service.mintLogin()
      const hostForUrl = host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host
      yield* Console.log(`http://${hostForUrl}:${port}/portal/login?token=${login.token}`)
    }).pipe(Effect.provide(SophiaLive(db)))
)

const sophia = Command.make("sophia").pipe(Command.withSubcommands([serve, stdio, connection, ledger, approvals, portal]))

const cli = Command.run(sophia, { name: "sophia", version: SERVER_INFO.version })

// Logs go to stderr, always: stdout carries command output, and in stdio mode only MCP messages.
const StderrLogger = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

cli(process.argv).pipe(
  Effect.catchAllCause((cause) =>
    Effect.sync(() => {
      // @effect/cli has already printed its own usage errors; anything else gets a short line on stderr
      const error = Cause.squash(cause)
      if (Cause.isInterruptedOnly(cause)) return
      if (!CliValidationError.isValidationError(error)) {
        const known = typeof error === "object" && error !== null && "message" in error && !Cause.isDie(cause)
        process.stderr.write(
          known ? `sophia: ${(error as { message: string }).message}\n` : `sophia: internal error\n${Cause.pretty(cause)}\n`
        )
      }
      process.exitCode = 1
    })
  ),
  Effect.provide(Layer.mergeAll(NodeContext.layer, StderrLogger)),
  Logger.withMinimumLogLevel(LogLevel.Info),
  // errors are reported above, on stderr; runMain's own report would go through a logger we do not control
  NodeRuntime.runMain({ disableErrorReporting: true })
)
