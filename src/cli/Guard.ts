/**
 * `sophia guard install` / `sophia guard check`: leases enforced at commit time. `install` writes a git
 * pre-commit hook that runs the hook that was there before (kept beside it as `pre-commit.before-sophia`,
 * so it keeps running, and its failure still stops the commit) and then `sophia guard check`. `check` asks
 * the daemon for the project's leases (`sophia.leases` over the REST path, bearer from `SOPHIA_BEARER`, daemon
 * from `--url` / `SOPHIA_URL`) and refuses, exit 1, when a staged path lies in an exclusive `path:` lease of
 * another connection: one line per conflict (path, holder, reason, expiry). A plain command: Node's `http`, git and
 * the glob rule (domain/LeaseGlobs.ts), never the library. `git commit --no-verify` skips it, as any hook.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { coverer, parseResource } from "../domain/LeaseGlobs.js"
import { bearerFromEnv, callTool, daemonUrl } from "./Daemon.js"

/** The first line after the shebang of a hook this command wrote. */
const MARK = "# sophia guard: installed by `sophia guard install`"
/** Where the pre-commit hook found at install time is kept (and run from ours). */
const BEFORE = "pre-commit.before-sophia"

const git = (dir: string, args: ReadonlyArray<string>) => {
  const r = spawnSync("git", ["-C", dir, ...args], { encoding: "buffer" })
  if (r.error !== undefined) throw new Error(`git is not available: ${r.error.message}`)
  if (r.status !== 0) throw new Error(`git ${args.join(" ")} in ${dir}: ${r.stderr.toString("utf8").trim()}`)
  return r.stdout.toString("utf8")
}

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

export interface GuardInstallOptions {
  readonly dir: string | undefined
  readonly project: string | undefined
  readonly url: string | undefined
}

/** The hook: the previous one first (its failure stops the commit), then the lease check, with this node and bin. */
const hookText = (o: GuardInstallOptions) => {
  const bin = path.resolve(process.argv[1] ?? "sophia")
  const flags = [
    ...(o.project !== undefined ? ["--project", quote(o.project)] : []),
    ...(o.url !== undefined ? ["--url", quote(o.url)] : [])
  ]
  return [
    "#!/bin/sh",
    MARK,
    "# It runs the pre-commit hook that was here before (kept as pre-commit.before-sophia), then refuses a commit",
    "# touching a path another agent holds under an exclusive Sophia lease. Bearer: SOPHIA_BEARER; daemon: SOPHIA_URL.",
    `hooks=$(dirname "$0")`,
    `if [ -x "$hooks/${BEFORE}" ]; then`,
    `  "$hooks/${BEFORE}" "$@" || exit $?`,
    "fi",
    `exec ${quote(process.execPath)} ${quote(bin)} guard check ${flags.join(" ")}`.trimEnd(),
    ""
  ].join("\n")
}

export const guardInstall = async (o: GuardInstallOptions): Promise<void> => {
  const dir = path.resolve(o.dir ?? ".")
  const hooks = path.resolve(dir, git(dir, ["rev-parse", "--git-path", "hooks"]).trim())
  fs.mkdirSync(hooks, { recursive: true })
  const hook = path.join(hooks, "pre-commit")
  const said: Array<string> = []
  if (fs.existsSync(hook) && !fs.readFileSync(hook, "utf8").includes(MARK)) {
    if (fs.existsSync(path.join(hooks, BEFORE))) {
      throw new Error(`${path.join(hooks, BEFORE)} exists already; move it or the pre-commit hook away first`)
    }
    fs.renameSync(hook, path.join(hooks, BEFORE))
    said.push(`kept the existing pre-commit hook as ${path.join(hooks, BEFORE)} (it runs first)`)
  }
  fs.writeFileSync(hook, hookText(o), { mode: 0o755 })
  fs.chmodSync(hook, 0o755)
  said.push(`installed ${hook}: commits touching a path another connection holds under an exclusive lease are refused`)
  if (o.url === undefined) said.push("the daemon: SOPHIA_URL when the hook runs (else http://127.0.0.1:7337); the bearer: SOPHIA_BEARER")
  else said.push("the bearer: SOPHIA_BEARER when the hook runs")
  process.stdout.write(said.join("\n") + "\n")
}

export interface GuardCheckOptions {
  readonly project: string | undefined
  readonly url: string | undefined
}

interface LeaseRow {
  readonly lease_id: string
  readonly connection_id: string
  readonly agent_name: string
  readonly resources: ReadonlyArray<string>
  readonly mode: string
  readonly reason: string
  readonly expires_at: string
  readonly mine: boolean
  readonly orphaned?: { readonly reason: string } | undefined
}

/** The paths the commit would touch (added, changed, deleted, both sides of a rename), from the repository's root. */
const stagedPaths = (dir: string) =>
  git(dir, ["diff", "--cached", "--name-only", "--no-renames", "-z"]).split("\0").filter((p) => p !== "")

/** One line per conflict: path, holder, reason, expiry. */
const conflictLine = (file: string, lease: LeaseRow, resource: string) =>
  `${file}: held by ${lease.agent_name} [${lease.connection_id.slice(0, 8)}]${
    lease.orphaned !== undefined ? ` (${lease.orphaned.reason}: take it over with sophia.lease_acquire)` : ""
  } under ${resource} for "${lease.reason.replace(/\s+/g, " ")}" until ${lease.expires_at}`

export const guardCheck = async (o: GuardCheckOptions): Promise<void> => {
  const root = git(".", ["rev-parse", "--show-toplevel"]).trim()
  const files = stagedPaths(root)
  if (files.length === 0) return
  const bearer = bearerFromEnv()
  const reply = await callTool(daemonUrl(o.url), bearer, "sophia.leases", { project: o.project ?? "default" })
  const theirs = (reply.leases as ReadonlyArray<LeaseRow>).filter((l) => !l.mine && l.mode === "exclusive")
  const matchers = theirs.flatMap((lease) =>
    lease.resources.flatMap((resource) => {
      const parsed = parseResource(resource)
      return typeof parsed !== "string" && parsed.kind === "path" ? [{ lease, resource, covers: coverer(parsed.glob) }] : []
    })
  )
  const lines = files.flatMap((file) => matchers.filter((m) => m.covers(file)).map((m) => conflictLine(file, m.lease, m.resource)))
  if (lines.length === 0) return
  process.stderr.write(lines.join("\n") + "\n")
  process.exitCode = 1
}
