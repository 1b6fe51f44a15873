#!/usr/bin/env node
/**
 * `npm run build` (also run by `npm ci` through `prepare`, and by the test suite's global setup):
 *  1. the library: every src/**\/*.ts transpiled one-to-one to dist/ (esbuild, no bundling: an embedder's
 *     `effect` stays the one instance), plus the worker scripts (src/**\/*.mjs: the sandbox child, the
 *     SQLite checkpoint worker) beside the modules that start them;
 *  2. its declarations: `tsc -p tsconfig.build.json` (dist/**\/*.d.ts);
 *  3. the CLI: src/main.ts and each command module bundled to dist/cli/ (CommonJS, minified; native modules
 *     external; loaded through the V8 code cache of the last run, dist/cli/compile-cache.cjs) so a
 *     command starts by parsing a few files instead of resolving hundreds of modules; the worker scripts
 *     are copied beside its chunks too.
 * A module starts a worker script by `new URL("./name.mjs", import.meta.url)`: the script sits beside it in
 * src/ (tsx, vitest) and dist/, and beside the chunk its code is bundled into in dist/cli/.
 * `--if-stale` skips the build when dist/ is newer than src/, package.json and this script.
 */
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
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

// the CLI: one CommonJS bundle per command module (each `import("./X.js")` in cli/Program.ts), loaded only
// when its command runs, and the entry (the parser) that loads it — CommonJS so that dist/cli/compile-cache.cjs
// can hand V8 the code cache of the last run (ES modules cannot be given one on Node 20)
const programFile = path.join(src, "cli", "Program.ts")
const commandModules = [...new Set([...fs.readFileSync(programFile, "utf8").matchAll(/(?<!typeof )import\("\.\/(\w+)\.js"\)/g)].map((m) => m[1]))]
  .filter((name) => fs.existsSync(path.join(src, "cli", `${name}.ts`)))
const commandsExternal = {
  name: "command-bundles",
  setup(b) {
    b.onResolve({ filter: /^\.\/\w+\.js$/ }, (args) => {
      const name = /^\.\/(\w+)\.js$/.exec(args.path)[1]
      return args.importer === programFile && args.kind === "dynamic-import" && commandModules.includes(name)
        ? { path: `./${name}.cjs`, external: true }
        : undefined
    })
  }
}
// `import { Effect, Layer } from "effect"` names the package's index, whose namespaces (`export * as Effect`)
// esbuild can only bundle whole: every export of Effect.ts and all it reaches (schedules, channels, cron…).
// Rewritten to `import * as Effect from "effect/Effect"` — the very same module — esbuild keeps only the
// members the code uses: Effect's share of a command's bundle drops from ~490 KB to ~290 KB (measured on
// `connection list`: ~12% of its start). Type-only names are dropped; the library's own dist/ is untouched.
const effectDeepImports = (text) =>
  text.replace(/^import \{([^}]*)\} from "effect"$/gm, (_, names) =>
    names.split(",").map((n) => n.trim()).filter((n) => n !== "" && !n.startsWith("type "))
      .map((n) => `import * as ${n} from "effect/${n}"`).join("\n"))
// esbuild escapes non-ASCII characters in strings but keeps a template literal's text as written: one `…` in
// a SQL template made a whole bundle a two-byte string for V8 (read and compiled ~3 ms slower on `connection
// revoke`). Every non-ASCII character of a source is written as its \u escape instead — the same value in a
// string, a template or a regular expression (src/ has no String.raw template, whose raw text would differ;
// the build checks every bundle is ASCII, below).
const asciiOnly = (text) =>
  text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
const sourceForBundle = {
  name: "source-for-bundle",
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/].*\.ts$/ }, (args) => ({
      loader: "ts",
      contents: asciiOnly(effectDeepImports(fs.readFileSync(args.path, "utf8")))
    }))
  }
}
// better-sqlite3's JavaScript is bundled (read through the compile cache with the rest, instead of a dozen files
// resolved and compiled on every start) and only its addon stays a file: the `bindings` package it asks for the
// addon walks a list of candidate paths (a thrown require each) from a root it reads off a stack trace — ~3 ms
// of every command's first open. The addon is asked for where better-sqlite3's build puts it, next to the
// package node finds from the bundle, then of `bindings` itself from there. Safe because the dependency is
// pinned to one version (checked here): the bundled JavaScript is the installed addon's own.
const sqliteAddon = () => {
  const pinned = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).dependencies["better-sqlite3"]
  const installed = JSON.parse(fs.readFileSync(path.join(root, "node_modules/better-sqlite3/package.json"), "utf8")).version
  if (pinned !== installed) throw new Error(`better-sqlite3 must be pinned to the installed version to be bundled (package.json: ${pinned}, installed: ${installed})`)
  return {
    name: "sqlite-addon",
    setup(b) {
      b.onResolve({ filter: /^bindings$/ }, (args) =>
        args.importer.includes(`${path.sep}better-sqlite3${path.sep}`) ? { path: "bindings", namespace: "sqlite-addon" } : undefined)
      b.onLoad({ filter: /.*/, namespace: "sqlite-addon" }, () => ({
        loader: "js",
        contents: `const path = require("node:path")
module.exports = (name) => {
  const root = path.dirname(require.resolve("better-sqlite3/package.json"))
  try {
    return require(path.join(root, "build", "Release", name))
  } catch (error) {
    if (error === null || typeof error !== "object" || error.code !== "MODULE_NOT_FOUND") throw error
    return require("node:module").createRequire(path.join(root, "package.json"))("bindings")({ bindings: name, module_root: root })
  }
}`
      }))
    }
  }
}
// Loading node:crypto costs ~6 ms of a start (it loads the streams too), and most commands never call it:
// src/'s imports of it are given a module of the same functions, each loading node:crypto when first
// called. Functions only (a constructor — capitalised — or a constant would not survive the wrapping): a
// named import of another name is esbuild's error, a namespace's member of another name this build's (below).
const lazyCrypto = async () => {
  const crypto = await import("node:crypto")
  const names = Object.keys(crypto).filter((k) => /^[a-z]/.test(k) && typeof crypto[k] === "function")
  return {
    name: "lazy-node-crypto",
    setup(b) {
      b.onResolve({ filter: /^(node:)?crypto$/ }, (args) =>
        args.importer.startsWith(src + path.sep) ? { path: "node:crypto", namespace: "lazy-node-crypto" } : undefined)
      b.onLoad({ filter: /.*/, namespace: "lazy-node-crypto" }, () => ({
        loader: "js",
        contents: [
          "let crypto",
          "const load = () => crypto ??= require(\"node:crypto\")",
          ...names.map((n) => `export const ${n} = (...args) => load().${n}(...args)`)
        ].join("\n")
      }))
    }
  }
}
// commander requires node:child_process when it loads, for the executable subcommands (`git-style`) this CLI
// never declares: ~4 ms of every command's start. Required when first used instead, so a spawn still works.
const commanderLazySpawn = {
  name: "commander-lazy-spawn",
  setup(b) {
    b.onLoad({ filter: /[\\/]commander[\\/]lib[\\/]command\.js$/ }, (args) => {
      const text = fs.readFileSync(args.path, "utf8")
      const eager = "const childProcess = require('node:child_process');"
      if (!text.includes(eager)) throw new Error(`commander changed: ${args.path} no longer has \`${eager}\``)
      const lazy = "const childProcess = { spawn: (...args) => require('node:child_process').spawn(...args) };"
      return { loader: "js", contents: text.replace(eager, lazy) }
    })
  }
}
const bundled = await build({
  entryPoints: {
    sophia: path.join(src, "main.ts"),
    ...Object.fromEntries(commandModules.map((name) => [name, path.join(src, "cli", `${name}.ts`)]))
  },
  outdir: path.join(next, "cli"),
  outExtension: { ".js": ".cjs" },
  bundle: true,
  minify: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  external: [...external.filter((name) => name !== "better-sqlite3"), "better-sqlite3/package.json"],
  plugins: [commandsExternal, sourceForBundle, commanderLazySpawn, await lazyCrypto(), sqliteAddon()],
  // a dynamic import() inside a bundle becomes require(): the code cache's vm.Script has no import() hook
  supported: { "dynamic-import": false },
  // the modules that find files beside themselves (worker scripts, build-info.json) by import.meta.url
  define: { "import.meta.url": "__sophiaModuleUrl" },
  banner: { js: "const __sophiaModuleUrl = require(\"node:url\").pathToFileURL(__filename).href;" },
  legalComments: "none",
  logLevel: "warning"
})
// an import a module does not export is undefined at run time, which esbuild only warns of: refused here (a
// name of node:crypto's the lazy module lacks, say, would otherwise be a call of undefined when first made)
const undefinedImports = bundled.warnings.filter((w) => w.id === "import-is-undefined")
if (undefinedImports.length > 0) {
  fs.rmSync(next, { recursive: true, force: true })
  console.error(`sophia build: imports of nothing: ${undefinedImports.map((w) => `${w.location?.file}:${w.location?.line}: ${w.text}`).join("; ")}`)
  process.exit(1)
}
// every bundle ASCII (see `asciiOnly`), and its hash and length recorded for the compile cache's key
// (dist/cli/compile-cache.cjs would otherwise hash a megabyte on every start, and load node:crypto to do it)
const bundles = {}
for (const name of fs.readdirSync(path.join(next, "cli")).filter((f) => f.endsWith(".cjs")).sort()) {
  const text = fs.readFileSync(path.join(next, "cli", name), "utf8")
  const wide = /[^\x00-\x7f]/.exec(text)
  if (wide !== null) {
    fs.rmSync(next, { recursive: true, force: true })
    console.error(`sophia build: dist/cli/${name} is not ASCII (${JSON.stringify(text.slice(Math.max(0, wide.index - 40), wide.index + 10))})`)
    process.exit(1)
  }
  bundles[name] = { sha1: createHash("sha1").update(text).digest("hex"), length: text.length }
}
fs.writeFileSync(path.join(next, "cli", "bundles.json"), JSON.stringify(bundles, null, 2) + "\n")
fs.copyFileSync(path.join(src, "cli", "CompileCache.cjs"), path.join(next, "cli", "compile-cache.cjs"))

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
