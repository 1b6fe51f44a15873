/**
 * The CLI tells what to do next and points at the right daemon (real child processes of the compiled bin):
 * every parser error is one `sophia: …` line naming the flag or word, with a "did you mean"; a wrong
 * subcommand lists its group's commands; help has no framework boilerplate; `sophia portal` links to the
 * port the daemon serving that database listens on; the banner's stdio entry starts a working server
 * when pasted; every start prints the portal link and hints; `connection list` is a table.
 */
import { assert, describe, it } from "@effect/vitest"
import { orientThrough, stdioEntry } from "../support/Banner.js"
import { sophia, tempDb } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall } from "../support/HeadHistory.js"

const noPg = { SOPHIA_DATABASE_URL: "" }

/** One line on stderr starting `sophia: `, exit 1, nothing on stdout, containing every `parts`. */
const assertRefused = (args: ReadonlyArray<string>, ...parts: ReadonlyArray<string>) => {
  const r = sophia(args, noPg)
  assert.strictEqual(r.status, 1, `${args.join(" ")}: exit ${r.status}: ${r.stderr}`)
  assert.strictEqual(r.stdout, "", `${args.join(" ")}: nothing on stdout`)
  const lines = r.stderr.split("\n").filter((l) => l.length > 0)
  assert.strictEqual(lines.length, 1, `${args.join(" ")}: one line, got:\n${r.stderr}`)
  assert.match(lines[0], /^sophia: /)
  for (const part of parts) assert.include(lines[0], part, args.join(" "))
  return lines[0]
}

describe("sophia CLI: every parser error is one line naming what is wrong", { timeout: 120_000 }, () => {
  it("unknown flags, unknown commands, bad values, missing flags and extra words", () => {
    const db = tempDb()
    assertRefused(["serve", "--prot", "1", "--db", db], "serve:", "unknown option '--prot'", "did you mean --port?")
    const sub = assertRefused(["connection", "creat", "--db", db], "connection:", "'creat'", "did you mean create?", "create, list, revoke, rename")
    assert.notInclude(sub, "serve", "the group's own commands, not the top level's")
    assertRefused(["conection", "list"], "unknown command 'conection'", "did you mean connection?", "serve, stdio, connection")
    assertRefused(["connection", "create", "--name", "x", "--profile", "root", "--db", db], "--profile 'root'", "observer, assistant, full")
    assertRefused(["connection", "create", "--profile", "full", "--db", db], "--name is required")
    assertRefused(["connection", "create", "--name"], "--name needs a value")
    assertRefused(["serve", "--port", "abc", "--db", db], "--port 'abc'", "integer")
    assertRefused(["portal", "--port", "70000", "--db", db], "--port '70000'")
    assertRefused(["connection", "list", "--log-level", "loud", "--db", db], "--log-level 'loud'", "info")
    assertRefused(["connection", "list", "extra", "--db", db], "connection list:", "too many arguments")
    assertRefused(["approvals", "list", "--al", "--db", db], "--al", "did you mean --all?")
  })

  it("help: usage names the whole command, no framework boilerplate; --version is the version", () => {
    const help = sophia(["connection", "create", "--help"])
    assert.strictEqual(help.status, 0)
    assert.match(help.stdout, /^Usage: sophia connection create \[options\]/)
    for (const boilerplate of ["A user-defined piece of text", "This setting is optional", "$ create", "--wizard", "--completions"]) {
      assert.notInclude(help.stdout, boilerplate)
    }
    assert.include(help.stdout, "--backlog")
    assert.include(help.stdout, "one of: observer, assistant, full")
    const version = sophia(["--version"])
    assert.match(version.stdout.trim(), /^\d+\.\d+\.\d+/)
  })
})

describe("sophia CLI: commands point at the right daemon", { timeout: 180_000 }, () => {
  it("`sophia portal` prints the port the daemon on that database listens on (started with --port 0)", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    try {
      const port = new URL(daemon.baseUrl).port
      assert.notStrictEqual(port, "7337")
      const r = sophia(["portal", "--db", db], noPg)
      assert.strictEqual(r.status, 0, r.stderr)
      const link = r.stdout.trim().split("\n").at(-1)!
      assert.match(link, new RegExp(`^http://127\\.0\\.0\\.1:${port}/portal/login\\?token=`))
      // the link logs in at that daemon
      const res = await fetch(link, { redirect: "manual" })
      assert.include([302, 303], res.status)
      assert.match(res.headers.get("set-cookie") ?? "", /sophia_portal=/)
      // an explicit --port still wins
      const explicit = sophia(["portal", "--db", db, "--port", "9999"], noPg)
      assert.match(explicit.stdout.trim(), /^http:\/\/127\.0\.0\.1:9999\/portal\/login\?token=/)
    } finally {
      await daemon.kill()
    }
    // stopped: the recorded address is gone (a clean stop removes it); the link says where to start it
    const after = sophia(["portal", "--db", db], noPg)
    assert.strictEqual(after.status, 0, after.stderr)
    assert.match(after.stdout.trim(), /^http:\/\/127\.0\.0\.1:\d+\/portal\/login\?token=/)
    assert.include(after.stderr, "sophia serve")
  })

  it("a killed daemon's stale address is not printed once another daemon serves the database", async () => {
    const db = tempDb()
    const first = await startDaemon(db)
    await first.kill("SIGKILL")
    const second = await startDaemon(db)
    try {
      const r = sophia(["portal", "--db", db], noPg)
      assert.strictEqual(r.status, 0, r.stderr)
      assert.include(r.stdout.trim().split("\n").at(-1)!, `${second.baseUrl}/portal/login?token=`)
    } finally {
      await second.kill()
    }
  })

  it("the first-start banner's stdio entry works when pasted; a restart keeps the portal link and hints", async () => {
    const db = tempDb()
    const first = await startDaemon(db)
    const banner = first.stdout()
    await first.kill()
    const entry = stdioEntry(banner)
    assert.isTrue(entry.command.startsWith("/"), "an absolute node")
    assert.isTrue(entry.args[0].startsWith("/"), "an absolute bin")
    assert.notInclude(banner, "npx")
    assert.deepStrictEqual(entry.args.slice(1), ["stdio", "--db", db])
    const orient = await orientThrough(entry)
    assert.strictEqual(orient.profile, "full")

    const again = await startDaemon(db)
    try {
      const restart = again.stdout()
      assert.notMatch(restart, /sph_[A-Za-z0-9_-]{43}/, "no bearer on a restart")
      assert.match(restart, /\/portal\/login\?token=/)
      assert.include(restart, "connection create")
      assert.include(restart, "approvals list")
    } finally {
      await again.kill()
    }
  })

  it("`connection create` starts caught up (a post addressed to it counts); --backlog starts with the history", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    try {
      const owner = daemon.ownerBearer!
      for (const body of ["one", "two"]) {
        assert.strictEqual((await restCall(daemon.baseUrl, owner, "sophia.coordination_post", { channel: "general", kind: "status", body })).status, 200)
      }
      const mint = (name: string, ...extra: Array<string>) =>
        JSON.parse(sophia(["connection", "create", "--name", name, "--profile", "observer", "--db", db, ...extra], noPg).stdout)
      const fresh = mint("fresh")
      const backlog = mint("historian", "--backlog")
      const unread = async (bearer: string) => (await restCall(daemon.baseUrl, bearer, "sophia.orient", {})).body._inbox_unread
      assert.strictEqual(await unread(fresh.bearer), 0)
      assert.strictEqual(await unread(backlog.bearer), 2)
      await restCall(daemon.baseUrl, owner, "sophia.coordination_post", { channel: "general", kind: "question", body: "you?", to: "fresh" })
      assert.strictEqual(await unread(fresh.bearer), 1, "a post addressed to it counts")
      const mine = await restCall(daemon.baseUrl, fresh.bearer, "sophia.coordination_inbox", { to_me: true })
      assert.deepStrictEqual(mine.body.posts.map((p: { body: string }) => p.body), ["you?"])
    } finally {
      await daemon.kill()
    }
  })

  it("`connection list` is a table (the portal's row labelled portal); --json is one JSON array", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    try {
      const login = sophia(["portal", "--db", db], noPg).stdout.trim().split("\n").at(-1)!
      await fetch(login, { redirect: "manual" }) // the portal's connection row exists once the owner logs in
      assert.strictEqual(sophia(["connection", "create", "--name", "builder", "--profile", "assistant", "--db", db], noPg).status, 0)
      const table = sophia(["connection", "list", "--db", db], noPg)
      assert.strictEqual(table.status, 0, table.stderr)
      const lines = table.stdout.trim().split("\n")
      assert.match(lines[0], /^NAME\s+PROFILE\s+ID\s+USER\s+SCOPE\s+LAST SEEN\s+STATUS$/)
      assert.match(table.stdout, /^builder\s+assistant\s+[0-9a-f]{8}\s+owner\s+all\s+never\s+live$/m)
      assert.match(table.stdout, /^portal\s+portal\s/m)
      const json = JSON.parse(sophia(["connection", "list", "--json", "--db", db], noPg).stdout)
      assert.includeMembers(json.map((c: { name: string }) => c.name), ["owner", "builder", "portal"])
      assert.strictEqual(json.find((c: { name: string }) => c.name === "portal").profile, "portal")
    } finally {
      await daemon.kill()
    }
  })
})
