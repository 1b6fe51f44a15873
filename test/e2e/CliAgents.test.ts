/**
 * The CLI as an agent's runtime uses it (real child processes against a real daemon): `sophia watch`
 * returns on a post from another connection, `sophia setup claude-code` merges into a project's existing
 * settings idempotently, `sophia hook claude-code` fails in one line when it cannot be answered, and
 * `connection create --allow-elicitation` records the owner's allowance.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { ROOT, SOPHIA, sophia, tempDb } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall } from "../support/HeadHistory.js"

const noPg = { SOPHIA_DATABASE_URL: "" }

/** A child `sophia` (or `command`) with stdin, resolving with its exit and output. */
const run = (args: ReadonlyArray<string>, env: Record<string, string>, stdin = "", command?: string) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const [file, argv] = command === undefined ? [process.execPath, [SOPHIA, ...args]] : [command, [...args]]
    const child = spawn(file, argv, { env: { ...process.env, ...noPg, ...env } })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.once("exit", (status) => resolve({ status, stdout, stderr }))
    child.stdin.end(stdin)
  })

/** Resolves once the daemon has answered `n` coordination_inbox calls (its /metrics), however loaded the machine. */
const inboxCallsAnswered = async (baseUrl: string, n: number) => {
  for (const deadline = Date.now() + 120_000; Date.now() < deadline;) {
    const metrics = await (await fetch(`${baseUrl}/metrics`)).text()
    const answered = [...metrics.matchAll(/^sophia_tool_calls_total\{[^}]*tool="sophia\.coordination_inbox"[^}]*\} (\d+)/gm)]
      .reduce((sum, m) => sum + Number(m[1]), 0)
    if (answered >= n) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`the daemon did not answer ${n} inbox call(s) within 120 s`)
}

describe("sophia watch / setup / hook", { timeout: 180_000 }, () => {
  it("`watch --once` blocks until another connection posts, prints the post, and exits", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    try {
      // two watchers, two connections: a watch marks what it prints read for its connection, so one connection's
      // channel watch could take the post from under the same connection's unread watch
      const bearerOf = (name: string) =>
        JSON.parse(sophia(["connection", "create", "--name", name, "--profile", "observer", "--db", db], noPg).stdout).bearer as string
      const env = { SOPHIA_BEARER: bearerOf("watcher"), SOPHIA_URL: daemon.baseUrl }
      const watching = run(["watch", "--once"], env)
      const asJson = run(["watch", "--once", "--json", "--channel", "arc:build-1"], { ...env, SOPHIA_BEARER: bearerOf("channel-watcher") })
      // `--channel` reads the conversation from where it starts (a first peek sets its cursor): post only after
      // that peek has been answered — a post before it is history to that watcher, and it would wait forever.
      // (The unread watcher sees the post whenever it starts: it is unread.)
      await inboxCallsAnswered(daemon.baseUrl, 1)
      const posted = await restCall(daemon.baseUrl, daemon.ownerBearer!, "sophia.coordination_post", {
        channel: "arc:build-1",
        kind: "question",
        body: "who runs\nthe build?"
      })
      assert.strictEqual(posted.status, 200)
      const [line, json] = await Promise.all([watching, asJson])
      assert.strictEqual(line.status, 0, line.stderr)
      assert.strictEqual(line.stdout, "[arc:build-1 #1] owner (question): who runs ⏎ the build?\n")
      assert.strictEqual(json.status, 0, json.stderr)
      assert.strictEqual(JSON.parse(json.stdout.trim()).body, "who runs\nthe build?")
    } finally {
      await daemon.kill()
    }
  })

  it("`setup claude-code` twice keeps every existing entry and adds one server and one set of hooks; the bearer works", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-project-"))
    fs.writeFileSync(path.join(dir, ".mcp.json"), JSON.stringify({ mcpServers: { other: { command: "other-server" } } }))
    fs.mkdirSync(path.join(dir, ".claude"))
    const mine = { type: "command", command: "echo mine" }
    fs.writeFileSync(
      path.join(dir, ".claude", "settings.local.json"),
      JSON.stringify({ permissions: { allow: ["Bash(ls)"] }, hooks: { Stop: [{ hooks: [mine] }] } })
    )
    try {
      const args = ["setup", "claude-code", "--name", "builder", "--profile", "full", "--dir", dir, "--db", db]
      const first = sophia(args, noPg)
      assert.strictEqual(first.status, 0, first.stderr)
      assert.include(first.stdout, 'minted connection "builder"')
      assert.include(first.stdout, `updated ${path.join(dir, ".mcp.json")}`)
      const second = sophia(args, noPg)
      assert.strictEqual(second.status, 0, second.stderr)
      assert.include(second.stdout, "kept connection")
      assert.include(second.stdout, "unchanged")

      const mcp = JSON.parse(fs.readFileSync(path.join(dir, ".mcp.json"), "utf8"))
      assert.deepStrictEqual(Object.keys(mcp.mcpServers).sort(), ["other", "sophia"])
      assert.deepStrictEqual(mcp.mcpServers.other, { command: "other-server" })
      assert.strictEqual(mcp.mcpServers.sophia.url, `${daemon.baseUrl}/mcp`, "the daemon serving this database")
      const settings = JSON.parse(fs.readFileSync(path.join(dir, ".claude", "settings.local.json"), "utf8"))
      assert.deepStrictEqual(settings.permissions, { allow: ["Bash(ls)"] })
      for (const event of ["UserPromptSubmit", "PostToolUse", "Stop", "SubagentStop"]) {
        const hooks = settings.hooks[event].flatMap((g: { hooks: Array<{ url?: string }> }) => g.hooks)
        assert.lengthOf(hooks.filter((h: { url?: string }) => h.url === `${daemon.baseUrl}/hooks/claude-code`), 1, event)
      }
      assert.deepStrictEqual(settings.hooks.Stop[0].hooks, [mine], "the project's own Stop hook kept")
      // one connection minted, and its bearer (the one in both files) works
      const bearer = mcp.mcpServers.sophia.headers.Authorization.slice("Bearer ".length)
      assert.strictEqual(settings.hooks.Stop[1].hooks[0].headers.Authorization, `Bearer ${bearer}`)
      const orient = await restCall(daemon.baseUrl, bearer, "sophia.orient", {})
      assert.strictEqual(orient.body.name, "builder")
      // SessionStart is a command hook: run as Claude Code runs it (a shell, the event on stdin), it answers the brief
      assert.lengthOf(settings.hooks.SessionStart, 1)
      const [start] = settings.hooks.SessionStart[0].hooks
      assert.strictEqual(start.type, "command")
      const fixture = fs.readFileSync(path.join(ROOT, "test/fixtures/hooks/claude-code/SessionStart.json"), "utf8")
      const ran = await run(["-c", start.command], {}, fixture, "/bin/sh")
      assert.strictEqual(ran.status, 0, ran.stderr)
      const out = JSON.parse(ran.stdout)
      assert.strictEqual(out.hookSpecificOutput.hookEventName, "SessionStart")
      assert.include(out.hookSpecificOutput.additionalContext, "builder")
      const listed = JSON.parse(sophia(["connection", "list", "--json", "--db", db], noPg).stdout)
      assert.lengthOf(listed.filter((c: { name: string }) => c.name === "builder"), 1)
    } finally {
      await daemon.kill()
    }
  })

  it("`setup claude-code` refuses a settings file that is not JSON and changes nothing", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-project-"))
    fs.writeFileSync(path.join(dir, ".mcp.json"), "{ not json")
    const r = sophia(["setup", "claude-code", "--name", "x", "--profile", "full", "--dir", dir, "--db", tempDb()], noPg)
    assert.strictEqual(r.status, 1)
    assert.match(r.stderr.trim(), /^sophia: .*\.mcp\.json is not valid JSON/)
    assert.strictEqual(fs.readFileSync(path.join(dir, ".mcp.json"), "utf8"), "{ not json")
    assert.isFalse(fs.existsSync(path.join(dir, ".claude")))
  })

  it("`hook claude-code` without a bearer, with a revoked one, or with no daemon: one line, exit 1, nothing on stdout", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    try {
      const input = JSON.stringify({ hook_event_name: "SessionStart", session_id: "s", cwd: "/tmp", source: "startup" })
      const none = await run(["hook", "claude-code"], { SOPHIA_BEARER: "", SOPHIA_URL: daemon.baseUrl }, input)
      assert.strictEqual(none.status, 1)
      assert.match(none.stderr, /^sophia: set SOPHIA_BEARER/)
      const revoked = await run(["hook", "claude-code"], { SOPHIA_BEARER: "sph_nope", SOPHIA_URL: daemon.baseUrl }, input)
      assert.strictEqual(revoked.status, 1)
      assert.strictEqual(revoked.stdout, "")
      assert.match(revoked.stderr, /^sophia: http:\/\/127\.0\.0\.1:\d+\/hooks\/claude-code: unauthenticated: /)
      assert.lengthOf(revoked.stderr.trim().split("\n"), 1)
    } finally {
      await daemon.kill()
    }
    const gone = await run(["hook", "claude-code", "--url", "http://127.0.0.1:9"], { SOPHIA_BEARER: "sph_x" }, "{}")
    assert.strictEqual(gone.status, 1)
    assert.match(gone.stderr, /^sophia: no daemon answers at http:\/\/127\.0\.0\.1:9/)
  })

  it("an https: daemon URL is spoken to over TLS (node:https, loaded only for it), an http: one in the clear", async () => {
    // a listener that keeps the first byte each connection sends: 0x16 opens a TLS handshake, "P" a plain POST
    const firsts: Array<number> = []
    const server = net.createServer((socket) => socket.once("data", (d: Buffer) => (firsts.push(d[0]!), socket.destroy())))
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as net.AddressInfo).port
    try {
      const tls = await run(["hook", "claude-code", "--url", `https://127.0.0.1:${port}`], { SOPHIA_BEARER: "sph_x" }, "{}")
      const plain = await run(["hook", "claude-code", "--url", `http://127.0.0.1:${port}`], { SOPHIA_BEARER: "sph_x" }, "{}")
      assert.deepStrictEqual([tls.status, plain.status], [1, 1])
      assert.match(tls.stderr, /^sophia: no daemon answers at https:\/\/127\.0\.0\.1:\d+ /)
      assert.deepStrictEqual(firsts, [0x16, "P".charCodeAt(0)])
    } finally {
      server.close()
    }
  })

  it("`connection create --allow-elicitation` records the owner's allowance (default: none)", () => {
    const db = tempDb()
    sophia(["connection", "create", "--name", "helper", "--profile", "assistant", "--allow-elicitation", "--db", db], noPg)
    sophia(["connection", "create", "--name", "plain", "--profile", "assistant", "--db", db], noPg)
    const listed = JSON.parse(sophia(["connection", "list", "--json", "--db", db], noPg).stdout)
    const by = (name: string) => listed.find((c: { name: string }) => c.name === name)
    assert.strictEqual(by("helper").allow_elicitation, true)
    assert.strictEqual(by("plain").allow_elicitation, false)
  })
})
