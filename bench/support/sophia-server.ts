/**
 * The daemon under load: the served app (`ServeLive`, HTTP transport + services + sweep) over a fresh
 * SQLite file, with `AGENTS` full connections minted up front. Prints `{ url, bearers }` on stdout.
 */
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ServeLive } from "../../src/layers/App.js"
import { HttpServer } from "../../src/mcp/Http.js"
import { Auth } from "../../src/services/Auth.js"

// a signal ends the process through exit(), so a --cpu-prof profile is written
process.on("SIGINT", () => process.exit(0))

const agents = Number(process.env.AGENTS ?? 50)
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-load-"))

const main = Effect.gen(function*() {
  const auth = yield* Auth
  const http = yield* HttpServer
  const bearers: Array<string> = []
  for (let i = 0; i < agents; i++) bearers.push((yield* auth.createConnection({ name: `agent-${i}`, profile: "full" })).bearer)
  process.stdout.write(JSON.stringify({ url: http.mcpUrl, bearers }) + "\n")
  return yield* Effect.never
})

Effect.runPromise(
  main.pipe(
    Effect.provide(ServeLive({ store: { filename: path.join(dir, "sophia.db") }, host: "127.0.0.1", port: 0, naming: "underscore" })),
    Effect.provide(Layer.empty),
    Effect.scoped
  ) as Effect.Effect<never>
)
