/**
 * A ledger writer in its own OS process, for test/LedgerConcurrency.test.ts. Usage:
 *   SOPHIA_BEARER=… node --import tsx test/support/ledger-writer.ts <db> <work_id> <tag>
 * Reads JSON lines on stdin and answers one JSON line per command on stdout:
 *   {"op":"append","round":n,"expected_head":h}  → append one asserted event on head h
 *   {"op":"free","attempts":n}                     → n times: read the head, try to extend it
 *   {"op":"exit"}
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import * as readline from "node:readline"
import { ServicesLive } from "../../src/layers/App.js"
import { SqliteLive } from "../../src/layers/Sql.js"
import { Auth } from "../../src/services/Auth.js"
import { Ledger } from "../../src/services/Ledger.js"

const [db, workId, tag] = process.argv.slice(2)
const runtime = ManagedRuntime.make(ServicesLive.pipe(Layer.provideMerge(SqliteLive(db))))
const caller = await runtime.runPromise(Effect.flatMap(Auth, (auth) => auth.authenticate(process.env.SOPHIA_BEARER)))

const appendOnce = (expected: string, value: unknown) =>
  Effect.flatMap(Ledger, (ledger) =>
    ledger.append(caller, {
      work_id: workId,
      expected_head: expected,
      events: [{ type: "asserted", field: "writer", value }]
    })).pipe(
      Effect.map((r) => ({ ok: true as const, head: r.head, seq: r.seq })),
      Effect.catchAll((e) => Effect.succeed({ ok: false as const, tag: e._tag, ...(e._tag === "HeadMoved" ? { expected: e.expected, actual: e.actual } : {}) }))
    )

const out = (v: unknown) => process.stdout.write(JSON.stringify(v) + "\n")
out({ ready: tag })

for await (const line of readline.createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line)
  if (cmd.op === "exit") break
  if (cmd.op === "append") {
    out({ round: cmd.round, ...(await runtime.runPromise(appendOnce(cmd.expected_head, { tag, round: cmd.round }))) })
  } else if (cmd.op === "free") {
    let wins = 0
    let losses = 0
    const other: Array<string> = []
    for (let i = 0; i < cmd.attempts; i++) {
      const head = await runtime.runPromise(Effect.flatMap(Ledger, (l) => l.state(caller.userId, workId)))
      const r = await runtime.runPromise(appendOnce(head!.head, { tag, i }))
      if (r.ok) wins++
      else if (r.tag === "HeadMoved") losses++
      else other.push(r.tag)
    }
    out({ wins, losses, other })
  }
}
await runtime.dispose()
process.exit(0)
