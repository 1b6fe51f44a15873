/**
 * What each command's bundle holds (issue 29: "owner commands and hooks never import the MCP layer, the sandbox
 * or the portal"): every module cli/Program.ts loads a handler from is bundled here as scripts/build.mjs does,
 * and its inputs are read from esbuild's metafile. The serving commands (cli/Serve.ts) are the only ones that
 * may hold the daemon.
 */
import { assert, describe, it } from "@effect/vitest"
import { build } from "esbuild"
import * as fs from "node:fs"
import * as path from "node:path"

const ROOT = path.resolve(__dirname, "..")
const program = fs.readFileSync(path.join(ROOT, "src/cli/Program.ts"), "utf8")
const modules = [...new Set([...program.matchAll(/(?<!typeof )import\("\.\/(\w+)\.js"\)/g)].map((m) => m[1]!))]

const inputsOf = async (name: string) => {
  const r = await build({
    entryPoints: [path.join(ROOT, "src/cli", `${name}.ts`)],
    bundle: true,
    write: false,
    outfile: path.join(ROOT, "dist", "bundle-check.cjs"),
    format: "cjs",
    platform: "node",
    target: "node20",
    external: ["better-sqlite3", "isolated-vm", "esbuild"],
    supported: { "dynamic-import": false },
    define: { "import.meta.url": "__url" },
    metafile: true,
    logLevel: "silent"
  })
  return Object.keys(r.metafile.inputs)
}

// the daemon's parts: the MCP transports, tool registry and portal (src/mcp, but for the client entries a
// command prints), the sandbox, the MCP SDK and its validators
const DAEMON = /(^|\/)src\/(mcp\/(?!ClientConfigs\.ts)|sandbox\/|services\/Sandbox\.ts|services\/sandbox\/)|@modelcontextprotocol|node_modules\/(ajv|zod)\//

describe("the CLI's bundles", () => {
  it("every command module is found, and only the serving one holds the MCP layer, the sandbox or the portal", async () => {
    assert.includeMembers(modules, [
      "Owner",
      "Revoke",
      "Connections",
      "Mint",
      "LedgerVerify",
      "ApprovalList",
      "Backup",
      "Serve",
      "PortalLink",
      "Setup",
      "SetupCodex",
      "Hook",
      "Watch",
      "Guard",
      "Notify"
    ])
    for (const name of modules) {
      const daemon = (await inputsOf(name)).filter((input) => DAEMON.test(input))
      if (name === "Serve") assert.isNotEmpty(daemon, "the check sees the daemon where it is")
      else assert.deepStrictEqual(daemon, [], `${name}'s bundle`)
    }
  }, 120_000)

  // each owner command holds the services it runs on (layers/Commands.ts) and no other: the services below
  // are the ones each bundle must not hold
  const SERVICES = ["Approvals", "Auth", "Coordination", "Daemons", "Leases", "Ledger", "Notifications", "Portal", "Waits"]
  const ONLY: Record<string, ReadonlyArray<string>> = {
    Backup: [],
    Connections: ["Auth", "Portal"],
    LedgerVerify: ["Auth", "Ledger"],
    ApprovalList: ["Approvals", "Auth"],
    Mint: ["Auth", "Coordination"],
    Setup: ["Auth", "Coordination", "Daemons"],
    SetupCodex: ["Auth", "Coordination", "Daemons"],
    PortalLink: ["Auth", "Coordination", "Daemons", "Portal"],
    Notify: ["Auth", "Daemons", "Leases", "Ledger", "Notifications", "Portal"],
    // every subscriber that writes, and what they ask: not Approvals
    Revoke: SERVICES.filter((service) => service !== "Approvals")
  }
  it("an owner command's bundle holds only the services it runs on", async () => {
    for (const [name, only] of Object.entries(ONLY)) {
      const inputs = await inputsOf(name)
      const held = SERVICES.filter((service) => inputs.includes(`src/services/${service}.ts`))
      assert.deepStrictEqual(held, [...only], `${name}'s bundle`)
    }
    // approve and deny, on the whole graph, hold it all
    const owner = await inputsOf("Owner")
    assert.deepStrictEqual(SERVICES.filter((service) => owner.includes(`src/services/${service}.ts`)), SERVICES)
  }, 120_000)

  it("the agents' commands (hook, watch, guard) load neither Effect nor the library", async () => {
    for (const name of ["Hook", "Watch", "Guard"]) {
      const heavy = (await inputsOf(name)).filter((input) => /node_modules\/(effect|@effect)\/|src\/(services|layers)\//.test(input))
      assert.deepStrictEqual(heavy, [], `${name}'s bundle`)
    }
  }, 60_000)
})
