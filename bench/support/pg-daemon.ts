/**
 * One served daemon for the Postgres benchmark: `ServeLive` over SOPHIA_DATABASE_URL with `AGENTS` full
 * connections minted up front (named after DAEMON so several daemons never clash). Prints `{ url, bearers }`.
 */
import { Effect } from "effect"
import { ServeLive } from "../../src/layers/App.js"
import { StoreChoice } from "../../src/layers/Sql.js"
import { HttpServer } from "../../src/mcp/Http.js"
import { Auth } from "../../src/services/Auth.js"

process.on("SIGTERM", () => process.exit(0))
const agents = Number(process.env.AGENTS ?? 8)
const daemon = process.env.DAEMON ?? "0"

const main = Effect.gen(function*() {
  const auth = yield* Auth
  const http = yield* HttpServer
  const bearers: Array<string> = []
  for (let i = 0; i < agents; i++) {
    bearers.push((yield* auth.createConnection({ name: `d${daemon}-agent-${i}`, profile: "full" })).bearer)
  }
  process.stdout.write(JSON.stringify({ url: http.mcpUrl.replace(/\/mcp$/, ""), bearers }) + "\n")
  return yield* Effect.never
})

Effect.runPromise(main.pipe(Effect.provide(ServeLive({
  store: StoreChoice.postgres(process.env.SOPHIA_DATABASE_URL!),
  host: "127.0.0.1",
  port: 0,
  naming: "underscore"
})))).catch((e) => {
  console.error(e)
  process.exit(1)
})
