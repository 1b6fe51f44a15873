/**
 * The package as a user installs it: `npm pack` the built package, install the tarball into a fresh app
 * folder (dependencies from the npm cache, the registry only for metadata the cache lacks; the native
 * addons' compiled binaries copied from this checkout, the same pinned versions, instead of rebuilding
 * them), then from that app: the bin with plain `node`, the library imported with plain `node`, a
 * consumer type-checked with `tsc --strict` against the shipped `.d.ts` (a wrong call is reported), and
 * `sophia stdio` driven by the SDK client from yet another folder. The tarball holds no tests,
 * benchmarks, CI or TypeScript sources.
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ROOT } from "../support/Cli.js"

const PKG = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"))
const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc")

/** Run a command without blocking the test worker (long synchronous spawns starve vitest's RPC). */
const sh = (cmd: string, args: ReadonlyArray<string>, cwd: string, env: Record<string, string> = {}) =>
  new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, SOPHIA_DATABASE_URL: "", ...env } })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    const timer = setTimeout(() => child.kill("SIGKILL"), 150_000)
    child.once("exit", (status) => {
      clearTimeout(timer)
      resolve({ status, stdout, stderr })
    })
  })

describe("the npm package", { timeout: 240_000 }, () => {
  it("packs, installs into an app, runs and imports with plain node, type-checks, serves stdio from anywhere", async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-pkg-"))
    // 1. pack the built package (dist/ is fresh: the test setup builds it)
    const pack = await sh("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], ROOT)
    assert.strictEqual(pack.status, 0, pack.stderr)
    const packed = JSON.parse(pack.stdout)[0]
    const files: Array<string> = packed.files.map((f: { path: string }) => f.path)
    assert.include(files, "bin/sophia.js")
    assert.include(files, "dist/index.js")
    assert.include(files, "dist/index.d.ts")
    assert.include(files, "dist/cli/sophia.cjs")
    assert.include(files, "dist/cli/bundles.json", "the compile cache's record of the bundles ships beside them")
    assert.include(files, "dist/sandbox/child.mjs", "the sandbox child ships where Sandbox.js looks for it")
    assert.include(files, "LICENSE")
    assert.include(files, "README.md")
    assert.include(files, "docs/refusal-codes.md")
    assert.include(files, "docs/tools.md")
    assert.include(files, "examples/embed.mjs")
    const forbidden = files.filter((f) =>
      /^(test|bench|\.ci|scripts|src)\//.test(f) || /\.test\.|\.bench\./.test(f) || (/\.ts$/.test(f) && !/\.d\.ts$/.test(f))
    )
    assert.deepStrictEqual(forbidden, [], "no tests, benchmarks, CI or TypeScript sources in the tarball")
    assert.strictEqual(PKG.name, "@sophia-mcp/server")
    assert.isDefined(PKG.peerDependencies.effect)

    // 2. install the tarball into a fresh app
    const app = path.join(work, "app")
    fs.mkdirSync(app)
    fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }))
    const installed = await sh("npm", [
      "install",
      path.join(work, packed.filename),
      "--prefer-offline",
      "--ignore-scripts",
      "--no-audit",
      "--no-fund"
    ], app)
    assert.strictEqual(installed.status, 0, installed.stderr)
    for (const [pkg, dir] of [["better-sqlite3", "build"], ["isolated-vm", "out"]] as const) {
      fs.cpSync(path.join(ROOT, "node_modules", pkg, dir), path.join(app, "node_modules", pkg, dir), { recursive: true })
    }
    assert.isFalse(fs.existsSync(path.join(app, "node_modules/tsx")), "no TypeScript loader is installed")
    const installedPkg = path.join(app, "node_modules", PKG.name)
    const bin = path.join(installedPkg, "bin/sophia.js")

    // 3. the bin with plain node, from the app's folder; each bundle it loads leaves its code cache
    // (src/cli/CompileCache.cjs), keyed by the build's record of the installed bytes
    const cacheHome = path.join(work, "cache")
    const version = await sh(process.execPath, [path.join(app, "node_modules/.bin/sophia"), "--version"], app, { XDG_CACHE_HOME: cacheHome })
    assert.strictEqual(version.status, 0, version.stderr)
    assert.strictEqual(version.stdout.trim(), PKG.version)
    const db = path.join(work, "graph", "sophia.db")
    const created = await sh(process.execPath, [bin, "connection", "create", "--name", "pkg-agent", "--profile", "full", "--db", db], app, {
      XDG_CACHE_HOME: cacheHome
    })
    assert.strictEqual(created.status, 0, created.stderr)
    const minted = JSON.parse(created.stdout)
    const record = JSON.parse(fs.readFileSync(path.join(installedPkg, "dist/cli/bundles.json"), "utf8"))
    const [v8] = fs.readdirSync(path.join(cacheHome, "sophia"))
    assert.sameMembers(
      fs.readdirSync(path.join(cacheHome, "sophia", v8!)).map((f) => f.replace(/-\d+$/, "")),
      [record["sophia.cjs"].sha1, record["Mint.cjs"].sha1]
    )

    // 4. the library with plain node
    fs.writeFileSync(
      path.join(app, "embed.mjs"),
      `import { Effect, Logger } from "effect"
import { Auth, Dispatcher, SophiaTest } from "${PKG.name}"
const program = Effect.gen(function* () {
  const auth = yield* Auth
  const minted = yield* auth.createConnection({ name: "embedded", profile: "full" })
  const caller = yield* auth.authenticate(minted.bearer)
  const out = yield* (yield* Dispatcher).call(caller, "sophia.orient", {})
  console.log(JSON.stringify({ ok: out.ok, name: out.body.name, profile: out.body.profile }))
})
await Effect.runPromise(program.pipe(Effect.provide(SophiaTest), Effect.provide(Logger.remove(Logger.defaultLogger))))
`
    )
    const embedded = await sh(process.execPath, ["embed.mjs"], app)
    assert.strictEqual(embedded.status, 0, embedded.stderr)
    assert.deepStrictEqual(JSON.parse(embedded.stdout), { ok: true, name: "embedded", profile: "full" })

    // the shipped embedding example runs as documented, from the app
    const example = await sh(process.execPath, [path.join(installedPkg, "examples/embed.mjs")], app)
    assert.strictEqual(example.status, 0, example.stderr)
    assert.include(example.stdout, "through the Dispatcher: forbidden_profile")

    // 5. a consumer type-checked against the shipped declarations, strictest settings, no skipLibCheck
    fs.writeFileSync(
      path.join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2022",
          noUncheckedIndexedAccess: true,
          exactOptionalPropertyTypes: true,
          types: []
        },
        files: ["consumer.ts"]
      })
    )
    const consumer = (call: string) =>
      `import { Effect } from "effect"
import { Auth, Dispatcher, SophiaTest } from "${PKG.name}"
import type { Caller, CallOutcome } from "${PKG.name}"
export const program: Effect.Effect<CallOutcome, unknown, Auth | Dispatcher> = Effect.gen(function* () {
  const auth = yield* Auth
  const minted = yield* auth.createConnection(${call})
  const caller: Caller = yield* auth.authenticate(minted.bearer)
  return yield* (yield* Dispatcher).call(caller, "sophia.orient", {})
})
export const run = Effect.runPromise(program.pipe(Effect.provide(SophiaTest)))
`
    fs.writeFileSync(path.join(app, "consumer.ts"), consumer(`{ name: "typed", profile: "observer" }`))
    const good = await sh(process.execPath, [TSC, "-p", "."], app)
    assert.strictEqual(good.status, 0, `a correct consumer type-checks:\n${good.stdout}${good.stderr}`)
    fs.writeFileSync(path.join(app, "consumer.ts"), consumer(`{ name: 42, profile: "root" }`))
    const bad = await sh(process.execPath, [TSC, "-p", "."], app)
    assert.notStrictEqual(bad.status, 0, "a wrong call is reported")
    assert.match(bad.stdout, /consumer\.ts\(6,\d+\): error TS2322/)
    assert.notMatch(bad.stdout, /node_modules/, "no error inside the package's own declarations")

    // 6. `sophia stdio` from yet another folder, driven by the SDK client
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-elsewhere-"))
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [bin, "stdio", "--db", db],
      cwd: elsewhere,
      env: { ...(process.env as Record<string, string>), SOPHIA_BEARER: minted.bearer, SOPHIA_DATABASE_URL: "" },
      stderr: "pipe"
    })
    const client = new Client({ name: "pkg-test", version: "1.0.0" })
    await client.connect(transport)
    try {
      const r = await client.callTool({ name: "sophia_orient", arguments: {} })
      assert.strictEqual((r.structuredContent as any).connection_id, minted.connection_id)
      const code = await client.callTool({ name: "sophia_execute_code", arguments: { code: "return 6 * 7" } })
      assert.strictEqual((code.structuredContent as any).result, 42, JSON.stringify(code.content))
    } finally {
      await client.close()
    }
    assert.deepStrictEqual(fs.readdirSync(elsewhere), [], "nothing was written into the folder it ran from")
  })
})
