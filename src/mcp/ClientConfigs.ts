/**
 * The ready-made MCP client entries a new bearer is shown with (the daemon's first-start banner, the
 * portal's `Create connection`): Streamable HTTP, and stdio over the same database. Every command in them
 * is absolute — this Node and this package's bin — so pasted anywhere it starts this Sophia, never one
 * `npx` would fetch. On Postgres the stdio entry carries the database URL in `SOPHIA_DATABASE_URL`.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** Where the stdio entry's process finds the graph: the SQLite file, or the Postgres URL. */
export type ClientStore = { readonly filename: string } | { readonly url: string }

export interface ClientConfigInput {
  /** The daemon's MCP endpoint (`http://host:port/mcp`). */
  readonly mcpUrl: string
  readonly bearer: string
  readonly store: ClientStore
  /** This package's `bin/sophia.js`, absolute (see `binPath`). */
  readonly bin: string
  /** The Node that runs it (default: this process's). */
  readonly node?: string
}

export interface ClientConfig {
  /** What the entry is for, one short line. */
  readonly title: string
  /** `claude mcp add …`: one shell line. */
  readonly command: string
  /** The `mcpServers` entry other clients take (JSON). */
  readonly json: { readonly mcpServers: { readonly sophia: Record<string, unknown> } }
}

/** The path of this package's bin, absolute, from the running process (the bundled CLI under dist/cli is loaded by it). */
export const binPath = (script: string | undefined = process.argv[1]): string => {
  if (script === undefined) return "sophia"
  try {
    const real = fs.realpathSync(script)
    const bin = path.resolve(path.dirname(real), "../../bin/sophia.js")
    return real.includes(`${path.sep}dist${path.sep}`) && fs.existsSync(bin) ? bin : real
  } catch {
    return script
  }
}

/** A word a POSIX shell reads back unchanged. */
export const shellQuote = (s: string) => (/^[A-Za-z0-9_/.:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`)

/** The two entries: Streamable HTTP (the daemon must run) and stdio (the client starts its own process). */
export const clientConfigs = (input: ClientConfigInput): ReadonlyArray<ClientConfig> => {
  const { bearer, bin, mcpUrl } = input
  const node = input.node ?? process.execPath
  const stdioEnv: Record<string, string> = "url" in input.store
    ? { SOPHIA_BEARER: bearer, SOPHIA_DATABASE_URL: input.store.url }
    : { SOPHIA_BEARER: bearer }
  const stdioArgs = "url" in input.store ? [bin, "stdio"] : [bin, "stdio", "--db", input.store.filename]
  const envFlags = Object.entries(stdioEnv).map(([k, v]) => `--env ${shellQuote(`${k}=${v}`)}`).join(" ")
  return [
    {
      title: "Streamable HTTP (the daemon must be running)",
      command: `claude mcp add --transport http sophia ${mcpUrl} --header "Authorization: Bearer ${bearer}"`,
      json: { mcpServers: { sophia: { type: "http", url: mcpUrl, headers: { Authorization: `Bearer ${bearer}` } } } }
    },
    {
      title: "stdio (the client starts its own process on the same database; works from any folder)",
      command: `claude mcp add sophia ${envFlags} -- ${[node, ...stdioArgs].map(shellQuote).join(" ")}`,
      json: { mcpServers: { sophia: { command: node, args: stdioArgs, env: stdioEnv } } }
    }
  ]
}

/** The entries as indented text (the banner). */
export const clientConfigsText = (input: ClientConfigInput): string =>
  clientConfigs(input).flatMap((c) => [
    `  ${c.title}:`,
    `    ${c.command}`,
    ...JSON.stringify(c.json, null, 2).split("\n").map((l) => "    " + l)
  ]).join("\n")
