/**
 * The Codex CLI, as far as its configuration reaches (real child processes, a real daemon): `sophia setup
 * codex` merges the MCP server and the notify program into a project's `.codex/config.toml` idempotently,
 * keeping every other line (comments too) and someone else's notify; `sophia hook codex`, the notify program,
 * tells the terminal at a turn's end what is addressed to the agent — without marking it read — and nothing
 * otherwise. The notification is Codex's documented `agent-turn-complete` payload (test/fixtures/hooks/codex).
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parse } from "smol-toml"
import { ROOT, sophia, tempDb } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall } from "../support/HeadHistory.js"

const noPg = { SOPHIA_DATABASE_URL: "" }
const turnComplete = fs.readFileSync(path.join(ROOT, "test/fixtures/hooks/codex/agent-turn-complete.json"), "utf8").trim()

const EXISTING = `# my Codex settings
model = "gpt-5-codex"

[mcp_servers.docs]
# the docs server, keep it
command = "docs-server"
args = ["--stdio"]
`

/** Run a notify program as Codex does: its argv, the notification appended, no terminal. */
const asCodex = (notify: ReadonlyArray<string>, notification: string) => {
  const r = spawnSync(notify[0]!, [...notify.slice(1), notification], { encoding: "utf8", env: { ...process.env, ...noPg }, timeout: 60_000 })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

describe("sophia setup codex / hook codex", { timeout: 180_000 }, () => {
  it("`setup codex` twice keeps every other line and adds one server and one notify; both work", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-codex-"))
    const file = path.join(dir, ".codex", "config.toml")
    fs.mkdirSync(path.dirname(file))
    fs.writeFileSync(file, EXISTING)
    try {
      const args = ["setup", "codex", "--name", "coder", "--profile", "full", "--dir", dir, "--db", db]
      const first = sophia(args, noPg)
      assert.strictEqual(first.status, 0, first.stderr)
      assert.include(first.stdout, 'minted connection "coder"')
      assert.include(first.stdout, `updated ${file} (MCP server sophia, notify)`)
      const written = fs.readFileSync(file, "utf8")
      const second = sophia(args, noPg)
      assert.strictEqual(second.status, 0, second.stderr)
      assert.include(second.stdout, "kept connection")
      assert.include(second.stdout, `unchanged ${file}`)
      assert.strictEqual(fs.readFileSync(file, "utf8"), written)

      // every line of the project's own kept, comments included
      for (const line of EXISTING.trim().split("\n")) assert.include(written.split("\n"), line)
      const config = parse(written) as any
      assert.strictEqual(config.model, "gpt-5-codex")
      assert.deepStrictEqual(Object.keys(config.mcp_servers).sort(), ["docs", "sophia"])
      assert.deepStrictEqual(config.mcp_servers.docs, { command: "docs-server", args: ["--stdio"] })
      assert.strictEqual(config.mcp_servers.sophia.url, `${daemon.baseUrl}/mcp`, "the daemon serving this database")
      assert.lengthOf(written.match(/^\[mcp_servers\.sophia\]$/gm) ?? [], 1)
      assert.lengthOf(written.match(/^notify = /gm) ?? [], 1)
      // the bearer works, and one connection was minted
      const bearer = config.mcp_servers.sophia.http_headers.Authorization.slice("Bearer ".length)
      assert.strictEqual((await restCall(daemon.baseUrl, bearer, "sophia.orient", {})).body.name, "coder")
      const listed = JSON.parse(sophia(["connection", "list", "--json", "--db", db], noPg).stdout)
      assert.lengthOf(listed.filter((c: { name: string }) => c.name === "coder"), 1)

      // the notify program as Codex runs it: silent with nothing addressed to the agent
      assert.deepStrictEqual(asCodex(config.notify, turnComplete), { status: 0, stdout: "", stderr: "" })
      // channel chatter is not addressed to it: still silent
      await restCall(daemon.baseUrl, daemon.ownerBearer!, "sophia.coordination_post", { channel: "general", kind: "status", body: "lunch" })
      assert.strictEqual(asCodex(config.notify, turnComplete).stdout, "")
      // a question to it: told (no terminal here, so on stdout), and still unread for the agent
      const asked = await restCall(daemon.baseUrl, daemon.ownerBearer!, "sophia.coordination_post", {
        channel: "arc:build-1",
        kind: "question",
        body: "who runs the build?",
        to: "coder"
      })
      assert.strictEqual(asked.status, 200, JSON.stringify(asked.body))
      const told = asCodex(config.notify, turnComplete)
      assert.strictEqual(told.status, 0, told.stderr)
      assert.strictEqual(
        told.stdout,
        "Sophia: 1 post addressed to this agent unread; first: [arc:build-1 #1] owner (question → coder): who runs the build?\n"
      )
      const inbox = await restCall(daemon.baseUrl, bearer, "sophia.coordination_inbox", { to_me: true })
      assert.deepStrictEqual(inbox.body.posts.map((p: { body: string }) => p.body), ["who runs the build?"], "peeked, not read")
      // read now: the next turn's end is silent again; another notification type is ignored
      assert.strictEqual(asCodex(config.notify, turnComplete).stdout, "")
      assert.deepStrictEqual(asCodex(config.notify, JSON.stringify({ type: "approval-requested" })), { status: 0, stdout: "", stderr: "" })
    } finally {
      await daemon.kill()
    }
  })

  it("`setup codex` keeps someone else's notify program, and refuses a file that is not TOML, changing nothing", () => {
    const db = tempDb()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-codex-"))
    const file = path.join(dir, ".codex", "config.toml")
    fs.mkdirSync(path.dirname(file))
    fs.writeFileSync(file, `notify = ["notify-send", "codex"]\n`)
    const r = sophia(["setup", "codex", "--name", "coder", "--profile", "assistant", "--dir", dir, "--url", "http://127.0.0.1:9", "--db", db], noPg)
    assert.strictEqual(r.status, 0, r.stderr)
    assert.include(r.stdout, "kept your notify program")
    const config = parse(fs.readFileSync(file, "utf8")) as any
    assert.deepStrictEqual(config.notify, ["notify-send", "codex"])
    assert.strictEqual(config.mcp_servers.sophia.url, "http://127.0.0.1:9/mcp")

    const bad = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-codex-"))
    fs.mkdirSync(path.join(bad, ".codex"))
    fs.writeFileSync(path.join(bad, ".codex", "config.toml"), "model = \n")
    const refused = sophia(["setup", "codex", "--name", "x", "--profile", "full", "--dir", bad, "--db", db], noPg)
    assert.strictEqual(refused.status, 1)
    assert.match(refused.stderr.trim(), /^sophia: .*config\.toml: not valid TOML .*nothing was changed$/)
    assert.strictEqual(fs.readFileSync(path.join(bad, ".codex", "config.toml"), "utf8"), "model = \n")
    const listed = JSON.parse(sophia(["connection", "list", "--json", "--db", db], noPg).stdout)
    assert.lengthOf(listed.filter((c: { name: string }) => c.name === "x"), 0, "nothing minted either")
  })

  it("`hook codex` with no notification or one that is not JSON: one line, exit 1", () => {
    const none = sophia(["hook", "codex"], { SOPHIA_BEARER: "x" })
    assert.strictEqual(none.status, 1)
    assert.match(none.stderr, /^sophia: hook codex: Codex's notify passes the notification/)
    const garbled = sophia(["hook", "codex", "{nope"], { SOPHIA_BEARER: "x" })
    assert.strictEqual(garbled.status, 1)
    assert.match(garbled.stderr, /^sophia: hook codex: the notification is not JSON/)
  })
})
