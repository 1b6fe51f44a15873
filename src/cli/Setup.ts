/**
 * `sophia setup claude-code`: one command that connects a Claude Code project to Sophia. It mints the
 * connection (or takes `--bearer`, or keeps the one this folder's `.mcp.json` already holds when it is a
 * live connection of that name) and merges into `D/.mcp.json` the MCP server `sophia` (Streamable HTTP,
 * bearer header) and into `D/.claude/settings.local.json` the hooks (HTTP hooks to the daemon's
 * `/hooks/claude-code`; SessionStart as the command `sophia hook claude-code`). Idempotent: every existing entry is kept, Sophia's own are replaced, never
 * doubled; it prints what it changed.
 */
import { Console, Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { binPath, shellQuote } from "../mcp/ClientConfigs.js"
import { DEFAULT_URL } from "./Daemon.js"
import { commandOn } from "../layers/Commands.js"
import { Auth } from "../services/Auth.js"
import { Daemons } from "../services/Daemons.js"
import { liveAddress } from "./LiveDaemon.js"
import { mintPublishes, mintServices } from "./Mint.js"
import type { Globals } from "./Store.js"
import { CliFailure, storeOf } from "./Store.js"

export interface SetupOptions extends Globals {
  readonly name: string
  readonly profile: "observer" | "assistant" | "full"
  readonly dir: string | undefined
  readonly url: string | undefined
  readonly bearer: string | undefined
}

/** The Claude Code events the daemon answers (`/hooks/claude-code`). */
const EVENTS = ["SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SubagentStop"] as const
const HOOK_PATH = "/hooks/claude-code"

type Json = Record<string, any>

const readJson = (file: string): Effect.Effect<Json | undefined, CliFailure> =>
  Effect.try({
    try: () => (fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, "utf8")) as Json : undefined),
    catch: (e) => new CliFailure({ message: `${file} is not valid JSON (${e instanceof Error ? e.message : String(e)}); fix or move it, nothing was changed` })
  }).pipe(Effect.filterOrFail(
    (j): j is Json | undefined => j === undefined || (typeof j === "object" && j !== null && !Array.isArray(j)),
    () => new CliFailure({ message: `${file} is not a JSON object; fix or move it, nothing was changed` })
  ))

/** `.mcp.json` with the server `sophia` set; the other servers and keys untouched. */
export const withServer = (config: Json | undefined, url: string, bearer: string): Json => ({
  ...config,
  mcpServers: { ...config?.mcpServers, sophia: { type: "http", url: `${url}/mcp`, headers: { Authorization: `Bearer ${bearer}` } } }
})

/** The command hook: this Node and this package's bin, absolute, with the agent's bearer and daemon. */
const hookCommand = (url: string, bearer: string, bin: string) =>
  `SOPHIA_BEARER=${shellQuote(bearer)} SOPHIA_URL=${shellQuote(url)} ${shellQuote(process.execPath)} ${shellQuote(bin)} hook claude-code`

/**
 * `settings.local.json` with one Sophia hook per event; every other hook, group and key kept. HTTP hooks to
 * the daemon, except SessionStart: Claude Code runs only command hooks there, so it gets `sophia hook
 * claude-code` (the same answer, through the CLI).
 */
export const withHooks = (settings: Json | undefined, url: string, bearer: string, bin = binPath()): Json => {
  const hooks: Json = { ...settings?.hooks }
  const ours = (h: Json) =>
    (h?.type === "http" && typeof h.url === "string" && h.url.endsWith(HOOK_PATH)) ||
    (h?.type === "command" && typeof h.command === "string" && h.command.endsWith(" hook claude-code"))
  for (const event of EVENTS) {
    const groups: Array<Json> = Array.isArray(hooks[event]) ? hooks[event] : []
    const kept = groups
      .map((g) => ({ ...g, hooks: Array.isArray(g.hooks) ? g.hooks.filter((h: Json) => !ours(h)) : g.hooks }))
      .filter((g) => !Array.isArray(g.hooks) || g.hooks.length > 0)
    const hook = event === "SessionStart"
      ? { type: "command", command: hookCommand(url, bearer, bin), timeout: 30 }
      : { type: "http", url: `${url}${HOOK_PATH}`, headers: { Authorization: `Bearer ${bearer}` }, timeout: 30 }
    hooks[event] = [...kept, event === "PostToolUse" ? { matcher: "*", hooks: [hook] } : { hooks: [hook] }]
  }
  return { ...settings, hooks }
}

/** The bearer this folder's `.mcp.json` already gives the server `sophia`, if any. */
const bearerIn = (config: Json | undefined): string | undefined => {
  const header = config?.mcpServers?.sophia?.headers?.Authorization
  return typeof header === "string" && header.startsWith("Bearer ") ? header.slice(7) : undefined
}

/** Write `text` to `file` whole (a temporary file renamed), unless it already holds it; what was done, in words. */
export const writeText = (file: string, before: string | undefined, text: string, what: string) =>
  Effect.sync(() => {
    if (before === text) return `unchanged ${file}`
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(`${file}.sophia-tmp`, text)
    fs.renameSync(`${file}.sophia-tmp`, file) // whole or not at all
    return `${before === undefined ? "created" : "updated"} ${file} (${what})`
  })

const write = (file: string, before: Json | undefined, after: Json, what: string) =>
  writeText(file, before === undefined ? undefined : JSON.stringify(before, null, 2) + "\n", JSON.stringify(after, null, 2) + "\n", what)

/**
 * The connection a setup writes: `--bearer`'s; else the one the folder already holds (`held`), when it is a
 * live connection of that name (so a second run changes nothing); else a new one, minted now. And the
 * daemon: `--url`, env SOPHIA_URL, the daemon serving this database (its recorded address answering), else
 * the default address.
 */
export const connectionFor = (o: SetupOptions, held: string | undefined) =>
  Effect.gen(function*() {
    const store = yield* storeOf(o)
    const found = yield* Effect.provide(
      Effect.gen(function*() {
        const auth = yield* Auth
        const recorded = yield* (yield* Daemons).addresses()
        const live = o.url ?? process.env.SOPHIA_URL ?? (yield* liveAddress(recorded))?.base_url ?? DEFAULT_URL
        if (o.bearer !== undefined) return { bearer: o.bearer, minted: false, url: live }
        if (held !== undefined) {
          const caller = yield* Effect.option(auth.authenticate(held))
          if (Option.isSome(caller) && caller.value.name === o.name) return { bearer: held, minted: false, url: live }
        }
        const m = yield* auth.createConnection({ name: o.name, profile: o.profile })
        return { bearer: m.bearer, minted: true, url: live }
      }),
      commandOn(store, Layer.merge(mintServices, Daemons.Default), mintPublishes)
    )
    const who = found.minted
      ? `minted connection "${o.name}" (${o.profile})`
      : o.bearer !== undefined
      ? "the connection of --bearer"
      : `kept connection "${o.name}" (this folder already held its bearer)`
    return { bearer: found.bearer, url: found.url.replace(/\/+$/, ""), who }
  })

export const setupClaudeCode = (o: SetupOptions) =>
  Effect.gen(function*() {
    const dir = path.resolve(o.dir ?? ".")
    const mcpFile = path.join(dir, ".mcp.json")
    const settingsFile = path.join(dir, ".claude", "settings.local.json")
    const [mcp, settings] = [yield* readJson(mcpFile), yield* readJson(settingsFile)]
    const { bearer, url: base, who } = yield* connectionFor(o, bearerIn(mcp))
    const lines = [
      who,
      yield* write(mcpFile, mcp, withServer(mcp, base, bearer), "MCP server sophia"),
      yield* write(settingsFile, settings, withHooks(settings, base, bearer), `hooks ${EVENTS.join(", ")}`),
      `daemon: ${base} (.mcp.json holds the bearer: keep it out of version control)`
    ]
    yield* Console.log(lines.join("\n"))
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
