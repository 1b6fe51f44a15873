// Embedding Sophia in an Effect app, without MCP. Run it with plain node:
//   node examples/embed.mjs            (from a checkout, after `npm ci`)
//   node node_modules/@sophia-mcp/server/examples/embed.mjs   (from an app that installed the package)
//
// 1. Provide a layer: `SophiaTest` (fresh in-memory SQLite) or `SophiaLive(path)` (a SQLite file, the
//    same database `sophia serve --db path` uses).
// 2. Obtain a `Caller`: mint a connection (or use an existing bearer) and authenticate its bearer.
// 3. Call through the `Dispatcher` for checked calls. Services do NOT enforce profiles or approvals —
//    the Dispatcher does (the same path every MCP and REST call takes) — so a service called directly
//    does whatever it is asked, for whichever caller you pass.
import { Effect, Logger } from "effect"
import { Auth, Coordination, Dispatcher, SophiaTest } from "@sophia-mcp/server"

const program = Effect.gen(function*() {
  const auth = yield* Auth
  const minted = yield* auth.createConnection({ name: "reader", profile: "observer" })
  const caller = yield* auth.authenticate(minted.bearer)

  // checked: an observer may not post, so the Dispatcher refuses with a stable code
  const dispatcher = yield* Dispatcher
  const refused = yield* dispatcher.call(caller, "sophia.coordination_post", { channel: "demo", kind: "status", body: "hi" })
  console.log("through the Dispatcher:", refused.ok ? "posted" : refused.body.error.code)

  // unchecked: the service itself takes the call (your code is the one deciding)
  const coordination = yield* Coordination
  const posted = yield* coordination.post(caller, { channel: "demo", kind: "status", body: "hi" })
  console.log("through the service directly: posted", posted.post_id)

  const inbox = yield* dispatcher.call(caller, "sophia.orient", {})
  console.log("orient as", inbox.body.name, "with profile", inbox.body.profile)
})

await Effect.runPromise(
  program.pipe(
    Effect.provide(SophiaTest),
    // an embedder chooses its loggers (the per-call log line is on only with RequestLogOn)
    Effect.provide(Logger.remove(Logger.defaultLogger))
  )
)
