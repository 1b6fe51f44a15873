#!/usr/bin/env node
// The `sophia` command: the compiled CLI under dist/cli/ (plain JavaScript; `npm ci` or `npm run build` makes it),
// its bundles compiled through the V8 code cache of their last run (dist/cli/compile-cache.cjs).
import { existsSync } from "node:fs"
import { createRequire } from "node:module"

const entry = new URL("../dist/cli/sophia.cjs", import.meta.url)
if (!existsSync(entry)) {
  process.stderr.write("sophia: not built yet (dist/ is missing); run `npm run build` in the package folder\n")
  process.exit(1)
}
const require = createRequire(entry)
require("./compile-cache.cjs")
require("./sophia.cjs")
