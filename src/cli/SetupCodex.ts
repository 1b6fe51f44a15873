/**
 * `sophia setup codex`: one command that connects a Codex CLI project to Sophia, as far as Codex's
 * configuration allows. Into `D/.codex/config.toml` (Codex reads a project's own file once the project is
 * trusted) it merges the MCP server `sophia` (Streamable HTTP, the bearer in `http_headers`) and Codex's one
 * notification program, `notify`: `sophia hook codex`, which Codex runs when the agent finishes a turn.
 * Codex lets that program say nothing back to the agent, so it tells the person at the terminal instead —
 * see cli/Hook.ts. An existing `notify` of someone else's is kept (Codex runs one), and said so.
 *
 * The file is edited as text so that every other line — comments included — stays as it was: Sophia's own
 * table and `notify` line are replaced, never doubled, and the result is parsed again to prove that nothing
 * else changed. A file that is not TOML, or holds Sophia's server in a form this cannot replace (inline or
 * dotted keys), is refused, nothing written.
 */
import { Console, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parse, stringify } from "smol-toml"
import { binPath } from "../mcp/ClientConfigs.js"
import { connectionFor, type SetupOptions, writeText } from "./Setup.js"
import { CliFailure } from "./Store.js"

type Toml = Record<string, any>

const refuse = (file: string, why: string) => new CliFailure({ message: `${file}: ${why}; fix or move it, nothing was changed` })

const parsed = (file: string, text: string) =>
  Effect.try({ try: () => parse(text) as Toml, catch: (e) => refuse(file, `not valid TOML (${e instanceof Error ? e.message.split("\n")[0] : String(e)})`) })

/** Sophia's notify program: ends with `hook codex` (the env and paths before it change with the install). */
const isOurNotify = (notify: unknown) =>
  Array.isArray(notify) && notify.length >= 2 && notify[notify.length - 2] === "hook" && notify[notify.length - 1] === "codex"

/** The table headers of Sophia's server (`[mcp_servers.sophia]` and its subtables), however quoted. */
const OUR_HEADER = /^\s*\[\s*mcp_servers\s*\.\s*(?:sophia|"sophia"|'sophia')\s*(?:\]|\.)/
const ANY_HEADER = /^\s*\[/
const OUR_NOTIFY_LINE = /^notify\s*=\s*\[.*"hook"\s*,\s*"codex"\s*\]\s*$/

/** The text without Sophia's table(s) and its one-line `notify`; every other line as it was. */
const withoutOurs = (text: string) => {
  const out: Array<string> = []
  let skipping = false
  for (const line of text.split("\n")) {
    if (ANY_HEADER.test(line)) skipping = OUR_HEADER.test(line)
    if (skipping || OUR_NOTIFY_LINE.test(line)) continue
    out.push(line)
  }
  return out.join("\n").replace(/\n{3,}/g, "\n\n").replace(/\s+$/, "")
}

/** `config.toml`'s text with Sophia's server and (unless another program holds it) its notify program. */
export const withCodexConfig = (file: string, text: string, url: string, bearer: string, notify: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const before = yield* parsed(file, text)
    const othersNotify = before.notify !== undefined && !isOurNotify(before.notify)
    const rest = withoutOurs(text)
    const restParsed = yield* parsed(file, rest)
    if (restParsed.mcp_servers?.sophia !== undefined) {
      return yield* Effect.fail(refuse(file, "it holds mcp_servers.sophia in a form setup cannot replace (inline table or dotted keys)"))
    }
    // top-level keys go before the first table
    const lines = rest === "" ? [] : rest.split("\n")
    const firstTable = lines.findIndex((l) => ANY_HEADER.test(l))
    const head = firstTable === -1 ? lines : lines.slice(0, firstTable)
    const tables = firstTable === -1 ? [] : lines.slice(firstTable)
    const notifyLine = othersNotify ? [] : [stringify({ notify: [...notify] }).trim()]
    const server = stringify({ mcp_servers: { sophia: { url: `${url}/mcp`, http_headers: { Authorization: `Bearer ${bearer}` } } } }).trim()
    // (after the file's opening comments, before its first key)
    const firstKey = head.findIndex((l) => l.trim() !== "" && !l.trim().startsWith("#"))
    const at = firstKey === -1 ? head.length : firstKey
    const top = [...head.slice(0, at), ...notifyLine, ...head.slice(at)]
    const merged = [...top, ...(tables.length > 0 ? ["", ...tables] : []), "", server]
      .join("\n").replace(/^\n+/, "").replace(/\n{3,}/g, "\n\n") + "\n"
    // proof: every key but ours parses as it did
    const after = yield* parsed(file, merged)
    const strip = (t: Toml) => {
      const { mcp_servers, notify: n, ...others } = t
      const { sophia: _, ...servers } = mcp_servers ?? {}
      return { others, servers, notify: othersNotify ? n : undefined }
    }
    if (JSON.stringify(strip(after)) !== JSON.stringify(strip(before))) {
      return yield* Effect.fail(refuse(file, "merging Sophia's entries would change other keys"))
    }
    return { text: merged, othersNotify }
  })

/** The bearer this folder's config already gives the server `sophia`, if any. */
const bearerIn = (config: Toml): string | undefined => {
  const header = config.mcp_servers?.sophia?.http_headers?.Authorization
  return typeof header === "string" && header.startsWith("Bearer ") ? header.slice(7) : undefined
}

export const setupCodex = (o: SetupOptions) =>
  Effect.gen(function*() {
    const dir = path.resolve(o.dir ?? ".")
    const file = path.join(dir, ".codex", "config.toml")
    const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : undefined
    const { bearer, url, who } = yield* connectionFor(o, bearerIn(yield* parsed(file, text ?? "")))
    const notify = ["/usr/bin/env", `SOPHIA_BEARER=${bearer}`, `SOPHIA_URL=${url}`, process.execPath, binPath(), "hook", "codex"]
    const merged = yield* withCodexConfig(file, text ?? "", url, bearer, notify)
    const lines = [
      who,
      yield* writeText(file, text, merged.text, merged.othersNotify ? "MCP server sophia" : "MCP server sophia, notify"),
      merged.othersNotify
        ? "kept your notify program (Codex runs one): Sophia's turn-end notice (sophia hook codex) is not installed"
        : "notify: at each turn's end, sophia hook codex tells the terminal what is addressed to this agent",
      `daemon: ${url} (.codex/config.toml holds the bearer: keep it out of version control; Codex reads it once the project is trusted)`
    ]
    yield* Console.log(lines.join("\n"))
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
