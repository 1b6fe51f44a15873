#!/usr/bin/env node
/**
 * `npm run build` (also run by `npm ci` through `prepare`, and by the test suite's global setup):
 *  1. the library: every src/**\/*.ts transpiled one-to-one to dist/ (esbuild, no bundling: an embedder's
 *     `effect` stays the one instance), plus the worker scripts (src/**\/*.mjs: the sandbox child, the
 *     SQLite checkpoint worker) beside the modules that start them;
 *  2. its declarations: `tsc -p tsconfig.build.json` (dist/**\/*.d.ts);
 *  3. the CLI: src/main.ts bundled to dist/cli/ (code-split, minified; native modules external) so a
 *     command starts by parsing a few files instead of resolving hundreds of modules; the worker scripts
 *     are copied beside its chunks too.
 * A module starts a worker script by `new URL("./name.mjs", import.meta.url)`: the script sits beside it in
 * src/ (tsx, vitest) and dist/, and beside the chunk its code is bundled into in dist/cli/.
 * `--if-stale` skips the build when dist/ is newer than src/, package.json and this script.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { build } from "esbuild"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
const src = path.join(root, "src")
const dist = path.join(root, "dist")
const stamp = path.join(dist, ".build-stamp")

const walk = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]))

const inputs = () => [...walk(src), path.join(root, "package.json"), path.join(root, "tsconfig.build.json"), new URL(import.meta.url).pathname]
const newest = () => Math.max(...inputs().map((f) => fs.statSync(f).mtimeMs))

if (process.argv.includes("--if-stale") && fs.existsSync(stamp) && fs.statSync(stamp).mtimeMs >= newest()) {
  process.exit(0)
}

const started = Date.now()
// build into a fresh folder and swap it in, so a process running the old dist/ never reads a half-written file
const next = path.join(root, `.dist-next-${process.pid}`)
fs.rmSync(next, { recursive: true, force: true })

// the CLI (src/main.ts, src/cli/) is no part of the library: it is only bundled, below
const cliSources = (f) => f === path.join(src, "main.ts") || f.startsWith(path.join(src, "cli") + path.sep)
const sources = walk(src).filter((f) => f.endsWith(".ts") && !cliSources(f))
const external = ["better-sqlite3", "isolated-vm", "esbuild"]

await build({
  entryPoints: sources,
  outdir: next,
  outbase: src,
  format: "esm",
  platform: "node",
  target: "node20",
  sourcemap: false,
  logLevel: "warning"
})
// the worker scripts (.mjs) and the portal's static assets (served by path from dist/mcp/portal/assets/)
const workers = walk(src).filter((f) => f.endsWith(".mjs"))
for (const f of walk(src).filter((f) => f.endsWith(".mjs") || f.includes(`${path.sep}portal${path.sep}assets${path.sep}`))) {
  const to = path.join(next, path.relative(src, f))
  fs.mkdirSync(path.dirname(to), { recursive: true })
  fs.copyFileSync(f, to)
}

const tsc = spawnSync(process.execPath, [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json", "--outDir", next], {
  cwd: root,
  stdio: "inherit"
})
if (tsc.status !== 0) {
  fs.rmSync(next, { recursive: true, force: true })
  console.error("sophia build: tsc failed")
  process.exit(1)
}

await build({
  entryPoints: { sophia: path.join(src, "main.ts") },
  outdir: path.join(next, "cli"),
  chunkNames: "[name]-[hash]", // beside sophia.js and the worker scripts copied below
  bundle: true,
  splitting: true,
  minify: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external,
  // CommonJS dependencies inside the ESM bundle still call require()
  banner: { js: "import { createRequire as __sophiaRequire } from \"node:module\"; const require = __sophiaRequire(import.meta.url);" },
  legalComments: "none",
  logLevel: "warning"
})

// the worker scripts beside the CLI's chunks: bundled, a module's `new URL("./name.mjs", import.meta.url)`
// resolves from its chunk, in dist/cli/ (one folder: two scripts of one name would be one file)
const workerNames = workers.map((f) => path.basename(f))
const clash = workerNames.find((name, i) => workerNames.indexOf(name) !== i)
if (clash !== undefined) {
  fs.rmSync(next, { recursive: true, force: true })
  console.error(`sophia build: two worker scripts are named ${clash}; the CLI bundle needs their names distinct`)
  process.exit(1)
}
for (const f of workers) fs.copyFileSync(f, path.join(next, "cli", path.basename(f)))

// the commit this build is made from, for `server_git_sha` in an installed package (mcp/Catalog.ts reads it
// only from this package: a host app's checkout around node_modules is never asked)
const head = spawnSync("git", ["rev-parse", "HEAD"], { cwd: root, encoding: "utf8" })
const gitSha = head.status === 0 && /^[0-9a-f]{40,64}$/.test(head.stdout.trim()) ? head.stdout.trim() : null
fs.writeFileSync(path.join(next, "build-info.json"), JSON.stringify({ git_sha: gitSha }) + "\n")

const old = path.join(root, `.dist-old-${process.pid}`)
if (fs.existsSync(dist)) fs.renameSync(dist, old)
fs.renameSync(next, dist)
fs.rmSync(old, { recursive: true, force: true })
fs.writeFileSync(stamp, new Date().toISOString() + "\n")
console.error(`sophia build: dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`)
