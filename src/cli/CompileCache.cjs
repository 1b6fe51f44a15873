/**
 * The CLI's compile cache (what Node 22's `module.enableCompileCache()` does, for Node 20): every bundle
 * of dist/cli/ is compiled with the V8 code cache the last run of the same bytes left, so a command starts
 * without parsing and compiling its megabyte of JavaScript again. After a run that had none (or whose cache
 * V8 rejected), the code the run compiled — lazily compiled functions included — is written back when the
 * process exits.
 *
 * Keyed by a hash of the bundle's bytes (V8 checks only a cache's length against the source, and npm gives
 * every installed file the same mtime), kept in $XDG_CACHE_HOME/sophia or ~/.cache/sophia, else the temp
 * folder; any failure to read or write it only costs the time it would have saved. SOPHIA_COMPILE_CACHE=0
 * turns it off.
 */
"use strict"
const crypto = require("node:crypto")
const fs = require("node:fs")
const Module = require("node:module")
const os = require("node:os")
const path = require("node:path")
const vm = require("node:vm")

const here = __dirname + path.sep

const cacheDir = () => {
  const base = process.env.XDG_CACHE_HOME || (os.homedir() ? path.join(os.homedir(), ".cache") : os.tmpdir())
  return path.join(base, "sophia", `v8-${process.versions.v8}-${process.arch}`)
}

const install = () => {
  if (process.env.SOPHIA_COMPILE_CACHE === "0") return
  const dir = cacheDir()
  const toWrite = []
  const compile = Module.prototype._compile
  Module.prototype._compile = function(content, filename) {
    if (!filename.startsWith(here) || !filename.endsWith(".cjs")) return compile.call(this, content, filename)
    const file = path.join(dir, crypto.createHash("sha1").update(content).digest("hex"))
    let cachedData
    try {
      cachedData = fs.readFileSync(file)
    } catch {
      cachedData = undefined
    }
    const script = new vm.Script(Module.wrap(content), { filename, cachedData })
    if (cachedData === undefined || script.cachedDataRejected) toWrite.push({ file, script })
    const wrapper = script.runInThisContext({ displayErrors: true })
    const require = Module.createRequire(filename)
    return wrapper.call(this.exports, this.exports, require, this, filename, path.dirname(filename))
  }
  process.once("exit", () => {
    for (const { file, script } of toWrite) {
      try {
        fs.mkdirSync(dir, { recursive: true })
        const temp = `${file}.${process.pid}`
        fs.writeFileSync(temp, script.createCachedData())
        fs.renameSync(temp, file)
      } catch {
        // a read-only home or a full disk: the next run compiles again, nothing else changes
      }
    }
  })
}

install()
