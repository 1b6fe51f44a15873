/**
 * The built CLI's compile cache (src/cli/CompileCache.cjs, docs/architecture.md "The CLI"): each bundle a
 * command loads leaves the V8 code cache of its run, keyed by the hash of the bundle's bytes the build
 * recorded (dist/cli/bundles.json) and the file's modification time; a later run uses it and answers the
 * same; a bundle changed since its build is never run from an old cache; SOPHIA_COMPILE_CACHE=0 or an
 * unwritable cache folder changes nothing but the time.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ROOT, sophia, tempDb } from "../support/Cli.js"

const cacheFiles = (home: string) => {
  const dir = path.join(home, "sophia")
  if (!fs.existsSync(dir)) return []
  return fs.readdirSync(dir).flatMap((v8) => fs.readdirSync(path.join(dir, v8)))
}
const recorded = (cli: string) => JSON.parse(fs.readFileSync(path.join(cli, "bundles.json"), "utf8"))
const keyOf = (bundle: string, cli = path.join(ROOT, "dist/cli")) =>
  `${recorded(cli)[bundle].sha1}-${Math.trunc(fs.statSync(path.join(cli, bundle)).mtimeMs)}`

/** The package's bin and dist/cli copied to a folder of their own (its node_modules: this checkout's). */
const copyOfTheCli = () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cli-copy-"))
  fs.cpSync(path.join(ROOT, "bin"), path.join(root, "bin"), { recursive: true })
  fs.cpSync(path.join(ROOT, "dist/cli"), path.join(root, "dist/cli"), { recursive: true })
  fs.copyFileSync(path.join(ROOT, "package.json"), path.join(root, "package.json"))
  fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(root, "node_modules"), "dir")
  const run = (args: ReadonlyArray<string>, env: Record<string, string>) => {
    const r = spawnSync(process.execPath, [path.join(root, "bin/sophia.js"), ...args], {
      encoding: "utf8",
      env: { ...process.env, ...env },
      timeout: 60_000
    })
    return { status: r.status, stdout: r.stdout, stderr: r.stderr }
  }
  return { cli: path.join(root, "dist/cli"), run }
}

describe("the CLI's compile cache", () => {
  it("the build records every bundle's hash and length, each bundle ASCII", () => {
    const cli = path.join(ROOT, "dist/cli")
    const bundles = fs.readdirSync(cli).filter((f) => f.endsWith(".cjs") && f !== "compile-cache.cjs")
    assert.sameMembers(Object.keys(recorded(cli)), bundles)
    for (const bundle of bundles) {
      const text = fs.readFileSync(path.join(cli, bundle), "utf8")
      assert.deepStrictEqual(recorded(cli)[bundle], { sha1: crypto.createHash("sha1").update(text).digest("hex"), length: text.length })
      assert.notMatch(text, /[^\x00-\x7f]/, bundle)
    }
  })

  it("a command leaves a cache per bundle it loaded, keyed by the recorded hash of its bytes, and answers the same with it", () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cache-"))
    const db = tempDb()
    assert.strictEqual(sophia(["connection", "create", "--name", "a", "--profile", "full", "--db", db], { XDG_CACHE_HOME: home }).status, 0)
    // the parser's bundle and the bundle of the command (cli/Mint.ts), nothing else
    assert.sameMembers(cacheFiles(home), [keyOf("sophia.cjs"), keyOf("Mint.cjs")])
    const first = sophia(["connection", "list", "--json", "--db", db], { XDG_CACHE_HOME: home })
    const again = sophia(["connection", "list", "--json", "--db", db], { XDG_CACHE_HOME: home })
    const uncached = sophia(["connection", "list", "--json", "--db", db], { SOPHIA_COMPILE_CACHE: "0", XDG_CACHE_HOME: home })
    assert.strictEqual(first.status, 0, first.stderr)
    assert.deepStrictEqual([again.stdout, uncached.stdout], [first.stdout, first.stdout])
    assert.strictEqual(JSON.parse(first.stdout)[0].name, "a")
    // `connection list` its own (cli/Connections.ts); `hook` its own small bundle only
    assert.sameMembers(cacheFiles(home), [keyOf("sophia.cjs"), keyOf("Mint.cjs"), keyOf("Connections.cjs")])
    sophia(["hook", "claude-code", "--url", "http://127.0.0.1:9"], { XDG_CACHE_HOME: home, SOPHIA_BEARER: "x" })
    assert.sameMembers(cacheFiles(home), [keyOf("sophia.cjs"), keyOf("Mint.cjs"), keyOf("Connections.cjs"), keyOf("Hook.cjs")])
  })

  it("a cache V8 rejects, an unwritable cache folder or SOPHIA_COMPILE_CACHE=0 only cost time", () => {
    const db = tempDb()
    const off = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cache-"))
    const r = sophia(["connection", "create", "--name", "a", "--profile", "full", "--db", db], { XDG_CACHE_HOME: off, SOPHIA_COMPILE_CACHE: "0" })
    assert.strictEqual(r.status, 0, r.stderr)
    assert.deepStrictEqual(cacheFiles(off), [])
    // a cache of garbage under the right key: V8 rejects it, the command runs, the cache is written anew
    const bad = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cache-"))
    sophia(["--version"], { XDG_CACHE_HOME: bad })
    const [v8] = fs.readdirSync(path.join(bad, "sophia"))
    const file = path.join(bad, "sophia", v8!, keyOf("sophia.cjs"))
    fs.writeFileSync(file, Buffer.alloc(4096, 7))
    const version = sophia(["--version"], { XDG_CACHE_HOME: bad })
    assert.strictEqual(version.status, 0, version.stderr)
    assert.notDeepEqual(fs.readFileSync(file), Buffer.alloc(4096, 7))
    // a cache folder that cannot be made (its parent is a file)
    const blocked = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cache-")), "file")
    fs.writeFileSync(blocked, "")
    const listed = sophia(["connection", "list", "--json", "--db", db], { XDG_CACHE_HOME: blocked })
    assert.strictEqual(listed.status, 0, listed.stderr)
    assert.strictEqual(listed.stderr, "")
    assert.strictEqual(JSON.parse(listed.stdout)[0].name, "a")
  })

  it("a bundle changed since its build is compiled from its own bytes: an edit of the same length by its mtime, another by its length", () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cache-"))
    const { cli, run } = copyOfTheCli()
    const parser = path.join(cli, "sophia.cjs")
    const before = run(["--help"], { XDG_CACHE_HOME: home })
    assert.strictEqual(before.status, 0, before.stderr)
    assert.include(before.stdout, "the owner's decisions on gated calls")
    assert.include(cacheFiles(home), keyOf("sophia.cjs", cli))
    // the same length, written a second later: a cache taken by length alone would print the old text
    const text = fs.readFileSync(parser, "utf8")
    assert.include(text, "the owner's decisions on gated calls")
    fs.writeFileSync(parser, text.replace("the owner's decisions on gated calls", "THE OWNER'S DECISIONS ON GATED CALLS"))
    const later = new Date(fs.statSync(parser).mtimeMs + 1000)
    fs.utimesSync(parser, later, later)
    const edited = run(["--help"], { XDG_CACHE_HOME: home })
    assert.strictEqual(edited.status, 0, edited.stderr)
    assert.include(edited.stdout, "THE OWNER'S DECISIONS ON GATED CALLS")
    assert.notInclude(edited.stdout, "the owner's decisions on gated calls")
    // another length: not the recorded bundle, so no cache is read or written for it
    const files = cacheFiles(home).length
    fs.writeFileSync(parser, text.replace("the owner's decisions on gated calls", "the owner's decisions on all gated calls"))
    const longer = run(["--help"], { XDG_CACHE_HOME: home })
    assert.strictEqual(longer.status, 0, longer.stderr)
    assert.include(longer.stdout, "the owner's decisions on all gated calls")
    assert.strictEqual(cacheFiles(home).length, files)
  })
})
