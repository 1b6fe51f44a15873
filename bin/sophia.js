#!/usr/bin/env node
// The `sophia` command: the compiled CLI under dist/ (plain JavaScript; `npm ci` or `npm run build` makes it).
import { existsSync } from "node:fs"

const entry = new URL("../dist/cli/sophia.js", import.meta.url)
if (!existsSync(entry)) {
  process.stderr.write("sophia: not built yet (dist/ is missing); run `npm run build` in the package folder\n")
  process.exit(1)
}
await import(entry.href)
