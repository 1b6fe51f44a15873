#!/usr/bin/env node
// The `sophia` command: the compiled CLI under dist/cli/ (plain JavaScript; `npm ci` or `npm run build` makes it),
// its bundles compiled through the V8 code cache of their last run (dist/cli/compile-cache.cjs). CommonJS (the
// package.json beside it says so): node starts a CommonJS entry ~10 ms sooner than an ES module one.
"use strict"
const { existsSync } = require("node:fs")
const path = require("node:path")

const cli = path.join(__dirname, "..", "dist", "cli")
if (!existsSync(path.join(cli, "sophia.cjs"))) {
  process.stderr.write("sophia: not built yet (dist/ is missing); run `npm run build` in the package folder\n")
  process.exit(1)
}
require(path.join(cli, "compile-cache.cjs"))
require(path.join(cli, "sophia.cjs"))
