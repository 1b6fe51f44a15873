/**
 * The CLI as a user meets it (real child processes of the compiled bin): one-line failures, the refusal
 * of a missing database, global flags anywhere, help without colour codes, logs never on stdout in stdio
 * mode, SIGTERM of the started daemon (directly and through `npm start`), and `sophia backup` while the
 * daemon writes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { ROOT, SOPHIA, sophia, tempDb } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall } from "../support/HeadHistory.js"

/** A failure as the issue wants it: non-zero exit, exactly one line on stderr, no stack, nothing on stdout. */
const assertOneLine = (r: { status: number | null; stdout: string; stderr: string }, mustInclude: string) => {
  assert.notStrictEqual(r.status, 0, `exit status: ${r.stderr}`)
  const lines = r.stderr.trim().split("\n")
  assert.strictEqual(lines.length, 1, `one line on stderr, got:\n${r.stderr}`)
  assert.notMatch(r.stderr, /\n\s+at /, "no stack trace")
  assert.notInclude(r.stderr, "internal error")
  assert.include(lines[0], mustInclude)
  assert.strictEqual(r.stdout, "", "nothing on stdout")
}

const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [SOPHIA, ...args], { env: { ...process.env, SOPHIA_DATABASE_URL: "", ...env } })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.once("exit", (status) => resolve({ status, stdout, stderr }))
  })

const freshDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cli-"))
const noPg = { SOPHIA_DATABASE_URL: "" }

describe("sophia CLI: failures are one line", { timeout: 120_000 }, () => {
  it("read-only commands refuse a database that does not exist, name its path and create nothing", () => {
    const dir = freshDir()
    const missing = path.join(dir, "nested", "folder", "sophia.db")
    const commands = [
      ["connection", "list"],
      ["connection", "revoke", "someone"],
      ["connection", "rename", "someone", "else"],
      ["ledger", "verify"],
      ["approvals", "list"],
      ["approvals", "approve", "nope"],
      ["backup", "--out", path.join(dir, "copy.db")]
    ]
    for (const command of commands) {
      const r = sophia([...command, "--db", missing], noPg)
      assertOneLine(r, missing)
      assert.include(r.stderr, "no database")
    }
    assert.deepStrictEqual(fs.readdirSync(dir), [], "no folder, no file, no backup was created")
    // a relative --db is resolved against the working folder and named absolutely
    const rel = sophia(["connection", "list", "--db", "not-here.db"], noPg)
    assertOneLine(rel, path.resolve("not-here.db"))
    assert.isFalse(fs.existsSync("not-here.db"))
  })

  it("a file that is not a database, an unopenable path, a bad port and a bad flag value", () => {
    const dir = freshDir()
    const text = path.join(dir, "notes.txt")
    fs.writeFileSync(text, "this is not SQLite\n".repeat(100))
    assertOneLine(sophia(["connection", "list", "--db", text], noPg), "not a database")
    assert.strictEqual(fs.readFileSync(text, "utf8"), "this is not SQLite\n".repeat(100), "the file is left untouched")
    // a database path below a regular file cannot be created
    assertOneLine(sophia(["connection", "create", "--name", "a", "--profile", "full", "--db", path.join(text, "x", "s.db")], noPg), text)
    assertOneLine(sophia(["serve", "--port", "99999", "--db", path.join(dir, "s.db")], noPg), "--port")
    assertOneLine(sophia(["connection", "create", "--name", "a", "--profile", "root", "--db", path.join(dir, "s.db")], noPg), "observer")
    assertOneLine(sophia(["connection", "list", "--log-level", "loud", "--db", path.join(dir, "s.db")], noPg), "--log-level")
  })

  it("a database path under /proc (where Node's recursive mkdir never returns) exits within 5 s in one line", async () => {
    const started = Date.now()
    const child = spawn(process.execPath, [SOPHIA, "serve", "--port", "0", "--db", "/proc/nope/x.db"], {
      env: { ...process.env, SOPHIA_DATABASE_URL: "" }
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    // a spinning process is killed after 5 s, and the assertions below then fail
    const killer = setTimeout(() => child.kill("SIGKILL"), 5_000)
    const status = await new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    clearTimeout(killer)
    assert.isBelow(Date.now() - started, 5_000)
    assertOneLine({ status, stdout, stderr }, "/proc/nope")
  })

  it("a port in use is one line", async () => {
    const blocker = net.createServer()
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", () => r()))
    const port = (blocker.address() as net.AddressInfo).port
    try {
      const r = await run(["serve", "--port", String(port), "--db", path.join(freshDir(), "s.db")])
      assertOneLine(r, "in use")
      assert.include(r.stderr, String(port))
    } finally {
      blocker.close()
    }
  })

  it("an unreachable Postgres URL (flag or env) is refused in one line", () => {
    const db = path.join(freshDir(), "s.db")
    assertOneLine(sophia(["connection", "list", "--database-url", "postgres://u:p@127.0.0.1:1/x", "--db", db]), "Postgres")
    assertOneLine(sophia(["--database-url", "postgres://u:p@127.0.0.1:1/x", "ledger", "verify"]), "Postgres")
    assertOneLine(sophia(["connection", "create", "--name", "a", "--profile", "full"], { SOPHIA_DATABASE_URL: "postgres://x/y" }), "Postgres")
    // a value that is no Postgres URL at all is said as such, naming the flag (not a DNS error for "base")
    const notUrl = sophia(["connection", "list", "--database-url", "notaurl", "--db", db])
    assertOneLine(notUrl, "--database-url")
    assert.include(notUrl.stderr, "is not a Postgres URL")
    assert.notInclude(notUrl.stderr, "getaddrinfo")
    // and a password in a wrong-scheme URL is never printed
    const secret = sophia(["connection", "list", "--database-url", "mysql://u:hunter2@h/x", "--db", db])
    assertOneLine(secret, "is not a Postgres URL")
    assert.notInclude(secret.stderr, "hunter2")
  })
})

describe("sophia CLI: flags and help", { timeout: 120_000 }, () => {
  it("global flags work before or after the subcommand; --log-level anywhere; logs only on stderr", () => {
    const db = tempDb()
    assert.strictEqual(sophia(["--db", db, "connection", "create", "--name", "w", "--profile", "full"], noPg).status, 0)
    const before = sophia(["--log-level", "debug", "--db", db, "--log-format", "json", "connection", "list", "--json"], noPg)
    assert.strictEqual(before.status, 0, before.stderr)
    const after = sophia(["connection", "list", "--json", "--db", db, "--log-level", "debug", "--log-format", "json"], noPg)
    assert.strictEqual(after.status, 0, after.stderr)
    for (const r of [before, after]) {
      assert.strictEqual(JSON.parse(r.stdout)[0].name, "w", "stdout is exactly the command's JSON")
      assert.strictEqual(r.stdout.trim().split("\n").length, 1)
      // the debug logs went to stderr, one JSON object per line
      const logs = r.stderr.trim().split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l))
      assert.isTrue(logs.some((l) => l.level === "DEBUG"), r.stderr)
    }
  })

  it("`sophia` and `sophia connection` alone list their subcommands with descriptions; no colour in a pipe", () => {
    const top = sophia([])
    assert.strictEqual(top.status, 0, top.stderr)
    for (const name of ["serve", "stdio", "connection", "ledger", "approvals", "backup"]) assert.match(top.stdout, new RegExp(`^  ${name} `, "m"))
    assert.include(top.stdout, "run the daemon")
    assert.notInclude(top.stdout, "\x1b[", "no ANSI codes when stdout is not a terminal")
    const group = sophia(["connection"])
    assert.strictEqual(group.status, 0, group.stderr)
    for (const name of ["create", "list", "revoke", "rename"]) assert.match(group.stdout, new RegExp(`^  ${name} `, "m"))
    assert.include(group.stdout, "mint a connection")
    assert.notInclude(group.stdout, "\x1b[")
  })

  it("every command's help shows descriptions and defaults", () => {
    const serve = sophia(["serve", "--help"])
    assert.strictEqual(serve.status, 0)
    // (help wraps long lines: compare with the whitespace folded)
    const text = serve.stdout.replace(/\s+/g, " ")
    assert.include(text, "(default: 7337)")
    assert.include(text, "(default: 127.0.0.1)")
    assert.include(text, "(default: ./.sophia/sophia.db)")
    assert.include(text, "one of: underscore, dotted; default: underscore")
    assert.include(text, "one of: pretty, json; default: pretty")
    assert.include(serve.stdout, "SOPHIA_DATABASE_URL")
    assert.include(serve.stdout, "--log-format")
    const list = sophia(["approvals", "list", "--help"])
    assert.include(list.stdout, "pending only")
    assert.include(list.stdout, "--database-url")
  })
})

describe("sophia stdio: logs never reach stdout", { timeout: 120_000 }, () => {
  it("with --log-level debug --log-format json every stdout line is MCP and the call's log line is on stderr", async () => {
    const db = tempDb()
    const minted = JSON.parse(sophia(["connection", "create", "--name", "stdio-logs", "--profile", "full", "--db", db], noPg).stdout)
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [SOPHIA, "--log-level", "debug", "stdio", "--db", db, "--log-format", "json"],
      env: { ...(process.env as Record<string, string>), SOPHIA_BEARER: minted.bearer, SOPHIA_DATABASE_URL: "" },
      cwd: os.tmpdir(),
      stderr: "pipe"
    })
    let stderr = ""
    transport.stderr!.on("data", (d) => (stderr += d))
    const client = new Client({ name: "stdio-logs", version: "1.0.0" })
    const errors: Array<unknown> = []
    client.onerror = (e) => errors.push(e)
    await client.connect(transport)
    try {
      const r = await client.callTool({ name: "sophia_coordination_post", arguments: { channel: "c", kind: "status", body: "hi" } })
      assert.isUndefined(r.isError, JSON.stringify(r.content))
      await client.callTool({ name: "sophia_orient", arguments: {} })
    } finally {
      await client.close()
    }
    assert.deepStrictEqual(errors, [], "a non-MCP line on stdout would have been a parse error in the client")
    const lines = stderr.trim().split("\n").map((l) => JSON.parse(l))
    const calls = lines.filter((l) => l.message === "tool call")
    assert.deepStrictEqual(calls.map((l) => [l.level, l.tool, l.outcome]), [
      ["INFO", "sophia.coordination_post", "ok"],
      ["INFO", "sophia.orient", "ok"]
    ])
    assert.strictEqual(calls[0].connection, minted.connection_id.slice(0, 8))
    assert.isNumber(calls[0].ms)
    assert.isTrue(lines.some((l) => l.level === "DEBUG"), "debug logs were on too, and on stderr")
  })
})

const healthy = (baseUrl: string) =>
  fetch(`${baseUrl}/healthz`).then((r) => r.ok, () => false)

const waitFor = async (what: string, f: () => Promise<boolean>, ms = 20_000) => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await f()) return
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.fail(`timed out waiting for ${what}`)
}

describe("stopping the daemon", { timeout: 120_000 }, () => {
  it("SIGTERM of the started daemon exits 0 and frees the port", async () => {
    const daemon = await startDaemon(tempDb())
    assert.isTrue(await healthy(daemon.baseUrl))
    assert.strictEqual(await daemon.kill("SIGTERM"), 0)
    assert.isFalse(await healthy(daemon.baseUrl), "nothing serves after the exit")
    // the banner tells how to stop it, with the pid
    assert.include(daemon.stdout(), `kill ${daemon.pid}`)
  })

  it("SIGTERM of `npm start` stops the daemon too (no process is left serving)", async () => {
    const db = tempDb()
    const npm = spawn("npm", ["start", "--silent", "--", "--port", "0", "--db", db], {
      cwd: ROOT,
      env: { ...process.env, SOPHIA_DATABASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    npm.stdout.on("data", (d) => (out += d))
    const exited = new Promise<void>((r) => npm.once("exit", () => r()))
    await waitFor("the daemon's banner", async () => /MCP endpoint (http:\/\/\S+)\/mcp/.test(out), 60_000)
    const baseUrl = /MCP endpoint (http:\/\/\S+)\/mcp/.exec(out)![1]
    const pid = Number(/pid (\d+)/.exec(out)![1])
    assert.isTrue(await healthy(baseUrl))
    npm.kill("SIGTERM")
    await exited
    await waitFor("the daemon to stop serving", async () => !(await healthy(baseUrl)))
    await waitFor("the daemon process to exit", async () => {
      try {
        process.kill(pid, 0)
        return false
      } catch {
        return true
      }
    })
  })
})

describe("sophia backup", { timeout: 180_000 }, () => {
  it("while the daemon writes, produces a file that ledger verify accepts", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    const bearer = daemon.ownerBearer!
    let stop = false
    let appended = 0
    const writer = (async () => {
      for (let i = 0; !stop; i++) {
        const opened = await restCall(daemon.baseUrl, bearer, "sophia.ledger_append", {
          work_id: `w-${i}`,
          expected_head: null,
          events: [{ type: "opened", title: `item ${i}` }]
        })
        assert.strictEqual(opened.status, 200, JSON.stringify(opened.body))
        const claimed = await restCall(daemon.baseUrl, bearer, "sophia.ledger_append", {
          work_id: `w-${i}`,
          expected_head: opened.body.head,
          events: [{ type: "claimed" }, { type: "asserted", field: "n", value: i }]
        })
        assert.strictEqual(claimed.status, 200, JSON.stringify(claimed.body))
        appended++
      }
    })()
    try {
      await waitFor("some writes", async () => appended >= 20)
      const out = path.join(freshDir(), "backup.db")
      const r = await run(["backup", "--out", out, "--db", db])
      assert.strictEqual(r.status, 0, r.stderr)
      const written = JSON.parse(r.stdout)
      assert.strictEqual(written.out, out)
      assert.isAbove(written.bytes, 0)
      const atBackup = appended
      await waitFor("writes after the backup", async () => appended >= atBackup + 5)
      stop = true
      await writer
      const verified = await run(["ledger", "verify", "--db", out])
      assert.strictEqual(verified.status, 0, verified.stderr)
      const report = JSON.parse(verified.stdout)
      assert.isTrue(report.ok)
      assert.isAtLeast(report.work_items, 20)
      assert.isAtMost(report.work_items, atBackup + 1, "a snapshot taken then, not the file grown afterwards")
      // refusing to overwrite an existing file
      const again = await run(["backup", "--out", out, "--db", db])
      assertOneLine(again, "already exists")
    } finally {
      stop = true
      await writer.catch(() => undefined)
      await daemon.kill("SIGTERM")
    }
  })
})
