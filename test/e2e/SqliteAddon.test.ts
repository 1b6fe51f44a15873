/**
 * The built CLI bundles better-sqlite3's JavaScript and loads only its native addon from the installed
 * package (scripts/build.mjs, `sqliteAddon`): where better-sqlite3's build puts it (build/Release), else
 * wherever the `bindings` package finds it from that package's folder. Bundling is safe only because the
 * dependency is pinned to the installed version: the bundled JavaScript is the addon's own.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ROOT } from "../support/Cli.js"

const CLI = path.join(ROOT, "dist/cli")

/**
 * bin and dist/cli beside a node_modules of this checkout's packages (linked) but better-sqlite3, which is
 * copied with its addon moved from build/Release to `addonDir`.
 */
const cliWithAddonIn = (addonDir: string) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-addon-"))
  fs.cpSync(path.join(ROOT, "bin"), path.join(root, "bin"), { recursive: true })
  fs.cpSync(CLI, path.join(root, "dist/cli"), { recursive: true })
  fs.copyFileSync(path.join(ROOT, "package.json"), path.join(root, "package.json"))
  const modules = path.join(root, "node_modules")
  fs.mkdirSync(modules)
  for (const name of fs.readdirSync(path.join(ROOT, "node_modules"))) {
    if (name !== "better-sqlite3" && name !== ".bin") {
      fs.symlinkSync(path.join(ROOT, "node_modules", name), path.join(modules, name), "dir")
    }
  }
  const sqlite = path.join(modules, "better-sqlite3")
  fs.mkdirSync(path.join(sqlite, addonDir), { recursive: true })
  fs.copyFileSync(path.join(ROOT, "node_modules/better-sqlite3/package.json"), path.join(sqlite, "package.json"))
  fs.cpSync(path.join(ROOT, "node_modules/better-sqlite3/lib"), path.join(sqlite, "lib"), { recursive: true })
  fs.copyFileSync(
    path.join(ROOT, "node_modules/better-sqlite3/build/Release/better_sqlite3.node"),
    path.join(sqlite, addonDir, "better_sqlite3.node")
  )
  const run = (args: ReadonlyArray<string>) => {
    const r = spawnSync(process.execPath, [path.join(root, "bin/sophia.js"), ...args], {
      encoding: "utf8",
      env: { ...process.env, SOPHIA_DATABASE_URL: "", XDG_CACHE_HOME: path.join(root, "cache") },
      timeout: 60_000
    })
    return { status: r.status, stdout: r.stdout, stderr: r.stderr }
  }
  return { root, run }
}

describe("the CLI's SQLite addon", () => {
  it("better-sqlite3 is pinned to the installed version, and its JavaScript is in the bundles, not required", () => {
    const pinned = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")).dependencies["better-sqlite3"]
    const installed = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules/better-sqlite3/package.json"), "utf8")).version
    assert.strictEqual(pinned, installed)
    for (const bundle of fs.readdirSync(CLI).filter((f) => f.endsWith(".cjs"))) {
      assert.notInclude(fs.readFileSync(path.join(CLI, bundle), "utf8"), "require(\"better-sqlite3\")", bundle)
    }
  })

  for (const addonDir of ["build/Release", "build/Debug"]) {
    it(`a command opens the store with the addon in ${addonDir}`, () => {
      const { root, run } = cliWithAddonIn(addonDir)
      const db = path.join(root, "store", "sophia.db")
      const created = run(["connection", "create", "--name", "addon", "--profile", "full", "--db", db])
      assert.strictEqual(created.status, 0, created.stderr)
      const listed = run(["connection", "list", "--json", "--db", db])
      assert.strictEqual(listed.status, 0, listed.stderr)
      assert.deepStrictEqual(JSON.parse(listed.stdout).map((c: { name: string }) => c.name), ["addon"])
    })
  }

  it("without the addon a command fails in one line naming the paths it tried", () => {
    const { root, run } = cliWithAddonIn("build/Release")
    fs.rmSync(path.join(root, "node_modules/better-sqlite3/build"), { recursive: true })
    const db = path.join(root, "store", "sophia.db")
    const created = run(["connection", "create", "--name", "addon", "--profile", "full", "--db", db])
    assert.notStrictEqual(created.status, 0)
    assert.include(created.stderr, "build/Release/better_sqlite3.node")
    assert.strictEqual(created.stderr.trim().split("\n").length, 1, created.stderr)
    assert.strictEqual(created.stdout, "")
  })
})
