/**
 * The built CLI's compile cache (src/cli/CompileCache.cjs, docs/architecture.md "The CLI"): each bundle a
 * command loads leaves the V8 code cache of its run, keyed by a hash of the bundle's bytes; a later run
 * uses it and answers the same; SOPHIA_COMPILE_CACHE=0 or an unwritable cache folder changes nothing but
 * the time.
 */
import { assert, describe, it } from "@effect/vitest"
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
const hashOf = (bundle: string) =>
  crypto.createHash("sha1").update(fs.readFileSync(path.join(ROOT, "dist/cli", bundle), "utf8")).digest("hex")

describe("the CLI's compile cache", () => {
  it("a command leaves a cache per bundle it loaded, keyed by the bundle's bytes, and answers the same with it", () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-cache-"))
    const db = tempDb()
    assert.strictEqual(sophia(["connection", "create", "--name", "a", "--profile", "full", "--db", db], { XDG_CACHE_HOME: home }).status, 0)
    // the parser's bundle and the bundle of the command (cli/Mint.ts), nothing else
    assert.sameMembers(cacheFiles(home), [hashOf("sophia.cjs"), hashOf("Mint.cjs")])
    const first = sophia(["connection", "list", "--json", "--db", db], { XDG_CACHE_HOME: home })
    const again = sophia(["connection", "list", "--json", "--db", db], { XDG_CACHE_HOME: home })
    const uncached = sophia(["connection", "list", "--json", "--db", db], { SOPHIA_COMPILE_CACHE: "0", XDG_CACHE_HOME: home })
    assert.strictEqual(first.status, 0, first.stderr)
    assert.deepStrictEqual([again.stdout, uncached.stdout], [first.stdout, first.stdout])
    assert.strictEqual(JSON.parse(first.stdout)[0].name, "a")
    // `connection list` its own (cli/Connections.ts); `hook` its own small bundle only
    assert.sameMembers(cacheFiles(home), [hashOf("sophia.cjs"), hashOf("Mint.cjs"), hashOf("Connections.cjs")])
    sophia(["hook", "claude-code", "--url", "http://127.0.0.1:9"], { XDG_CACHE_HOME: home, SOPHIA_BEARER: "x" })
    assert.sameMembers(cacheFiles(home), [hashOf("sophia.cjs"), hashOf("Mint.cjs"), hashOf("Connections.cjs"), hashOf("Hook.cjs")])
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
    const file = path.join(bad, "sophia", v8!, hashOf("sophia.cjs"))
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
})
