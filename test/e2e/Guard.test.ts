/**
 * `sophia guard install` / `sophia guard check` in a real temporary git repository against a real daemon: a
 * commit touching a path another connection holds under an exclusive lease is refused (exit 1, one line per
 * conflict naming the path, the holder, the reason and the expiry), it goes through once the lease is
 * released, the holder itself and paths outside the lease commit freely, and the pre-commit hook that was
 * there before keeps running (and still stops a commit when it fails).
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { sophia, tempDb } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall } from "../support/HeadHistory.js"

const noPg = { SOPHIA_DATABASE_URL: "" }

const git = (dir: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const r = spawnSync("git", args, { cwd: dir, encoding: "utf8", env: { ...process.env, ...noPg, ...env } })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** Write `file` (relative), stage it and try to commit, as the connection with `bearer`. */
const commit = (repo: string, file: string, bearer: string, extraEnv: Record<string, string> = {}) => {
  fs.mkdirSync(path.dirname(path.join(repo, file)), { recursive: true })
  fs.writeFileSync(path.join(repo, file), `${file} ${Math.random()}\n`)
  git(repo, ["add", file])
  const r = git(repo, ["commit", "-m", `change ${file}`], { SOPHIA_BEARER: bearer, ...extraEnv })
  if (r.status !== 0) git(repo, ["reset", "-q"])
  return r
}

describe("sophia guard", { timeout: 180_000 }, () => {
  it("refuses a commit in another connection's exclusive lease, allows it after the release; the old hook keeps running", async () => {
    const db = tempDb()
    const daemon = await startDaemon(db)
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-guard-"))
    try {
      const alice = JSON.parse(sophia(["connection", "create", "--name", "alice", "--profile", "full", "--db", db], noPg).stdout)
      const bob = JSON.parse(sophia(["connection", "create", "--name", "bob", "--profile", "full", "--db", db], noPg).stdout)
      assert.strictEqual(git(repo, ["init", "-q"]).status, 0)
      git(repo, ["config", "user.email", "t@example.com"])
      git(repo, ["config", "user.name", "t"])
      // the hook that was there: it leaves a trace, and refuses a commit of a file named STOP
      const hooks = path.join(repo, ".git", "hooks")
      fs.mkdirSync(hooks, { recursive: true })
      fs.writeFileSync(
        path.join(hooks, "pre-commit"),
        `#!/bin/sh\necho ran >> "${path.join(repo, ".git", "old-hook-ran")}"\ngit diff --cached --name-only | grep -q STOP && exit 3\nexit 0\n`,
        { mode: 0o755 }
      )

      const installed = sophia(["guard", "install", "--dir", repo, "--url", daemon.baseUrl], noPg)
      assert.strictEqual(installed.status, 0, installed.stderr)
      assert.include(installed.stdout, "pre-commit.before-sophia")
      // installing again changes nothing of the chain (the old hook is not wrapped twice)
      assert.strictEqual(sophia(["guard", "install", "--dir", repo, "--url", daemon.baseUrl], noPg).status, 0)
      assert.notInclude(fs.readdirSync(hooks).join(" "), "before-sophia.before-sophia")

      const held = await restCall(daemon.baseUrl, alice.bearer, "sophia.lease_acquire", {
        resources: ["path:src/**"],
        reason: "refactoring the parser"
      })
      assert.strictEqual(held.status, 200, JSON.stringify(held.body))

      const refused = commit(repo, "src/parser.ts", bob.bearer)
      assert.strictEqual(refused.status, 1, refused.stdout + refused.stderr)
      const lines = refused.stderr.trim().split("\n").filter((l) => l.includes("held by"))
      assert.lengthOf(lines, 1, refused.stderr)
      for (const word of ["src/parser.ts", "alice", "refactoring the parser", held.body.expires_at]) assert.include(lines[0], word)
      assert.strictEqual(git(repo, ["log", "--oneline"]).stdout.trim(), "", "nothing committed")

      // outside the lease, and the holder itself: committed
      assert.strictEqual(commit(repo, "docs/readme.md", bob.bearer).status, 0)
      assert.strictEqual(commit(repo, "src/lexer.ts", alice.bearer).status, 0)
      // the old hook ran on every attempt, and still stops a commit
      assert.strictEqual(fs.readFileSync(path.join(repo, ".git", "old-hook-ran"), "utf8").trim().split("\n").length, 3)
      const logBefore = git(repo, ["log", "--oneline"]).stdout
      const stopped = commit(repo, "STOP", bob.bearer)
      assert.notStrictEqual(stopped.status, 0)
      assert.notInclude(stopped.stderr, "held by")
      assert.strictEqual(git(repo, ["log", "--oneline"]).stdout, logBefore)

      const released = await restCall(daemon.baseUrl, alice.bearer, "sophia.lease_release", { lease_id: held.body.lease_id })
      assert.strictEqual(released.status, 200)
      const allowed = commit(repo, "src/parser.ts", bob.bearer)
      assert.strictEqual(allowed.status, 0, allowed.stderr)
      // --no-verify skips it, as any hook; guard check with nothing staged says nothing
      const check = spawnSync(process.execPath, [path.join(__dirname, "..", "..", "bin", "sophia.js"), "guard", "check", "--url", daemon.baseUrl], {
        cwd: repo,
        encoding: "utf8",
        env: { ...process.env, ...noPg, SOPHIA_BEARER: bob.bearer }
      })
      assert.strictEqual(check.status, 0, check.stderr)
      assert.strictEqual(check.stderr, "")
    } finally {
      await daemon.kill()
      fs.rmSync(repo, { recursive: true, force: true })
    }
  })
})
