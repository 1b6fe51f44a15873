/**
 * The CLI's compile cache (what Node 22's `module.enableCompileCache()` does, for Node 20): every bundle
 * of dist/cli/ is compiled with the V8 code cache the last run of the same bytes left, so a command starts
 * without parsing and compiling its megabyte of JavaScript again. After a run that had none (or whose cache
 * V8 rejected), the code the run compiled — lazily compiled functions included — is written back when the
 * process exits.
 *
 * Keyed by the hash of the bundle's bytes the build recorded (dist/cli/bundles.json: hashing them here would
 * load node:crypto, ~6 ms of every start) and the file's modification time: V8 checks only a cache's length
 * against the source, and npm gives every installed file the same mtime, so the hash tells two builds apart
 * and the mtime a bundle edited in place since. A bundle the record does not name, or whose length is not
 * the recorded one, is compiled without a cache. Kept in $XDG_CACHE_HOME/sophia or ~/.cache/sophia, else the
 * temp folder; any failure to read or write it only costs the time it would have saved.
 * SOPHIA_COMPILE_CACHE=0 turns it off. Loads nothing but fs, path and vm (the Module class is this module's own).
 */
"use strict"
const fs = require("node:fs")
const path = require("node:path")
const vm = require("node:vm")

const Module = module.constructor
const here = __dirname + path.sep

const cacheDir = () => {
  const home = process.env.HOME || require("node:os").homedir()
  const base = process.env.XDG_CACHE_HOME || (home ? path.join(home, ".cache") : require("node:os").tmpdir())
  return path.join(base, "sophia", `v8-${process.versions.v8}-${process.arch}`)
}

/** The build's record of its bundles: name → { sha1, length } (scripts/build.mjs); {} when unreadable. */
let bundles
const recorded = (name) => {
  if (bundles === undefined) {
    try {
      bundles = JSON.parse(fs.readFileSync(path.join(__dirname, "bundles.json"), "utf8"))
    } catch {
      bundles = {}
    }
  }
  return Object.prototype.hasOwnProperty.call(bundles, name) ? bundles[name] : undefined
}

/** The cache's key for a bundle's content, or undefined when the build did not record these bytes. */
const keyOf = (content, filename) => {
  const bundle = recorded(path.basename(filename))
  if (bundle === undefined || bundle.length !== content.length) return undefined
  try {
    return `${bundle.sha1}-${Math.trunc(fs.statSync(filename).mtimeMs)}`
  } catch {
    return undefined
  }
}

const install = () => {
  if (process.env.SOPHIA_COMPILE_CACHE === "0") return
  const dir = cacheDir()
  const toWrite = []
  const compile = Module.prototype._compile
  Module.prototype._compile = function(content, filename) {
    if (!filename.startsWith(here) || !filename.endsWith(".cjs")) return compile.call(this, content, filename)
    const key = keyOf(content, filename)
    if (key === undefined) return compile.call(this, content, filename)
    const file = path.join(dir, key)
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
