/**
 * A separate OS process that posts N times to one channel of a SQLite file through the real service
 * layer (SophiaLive). Used by test/CoordinationConcurrency.test.ts to race two processes on channel_seq.
 *
 *   node --import tsx test/support/CoordinationWriter.ts <db> <bearer> <channel> <n> <barrier-dir> <id> [<peer-id>]
 *
 * Writes `<barrier-dir>/ready-<id>`, waits for `<barrier-dir>/go`, posts, prints the seqs as JSON. With a
 * peer, after its first post it writes `posted-<id>` and waits for the peer's `posted-<peer-id>`: the two
 * writers' posts then overlap for certain, however the machine schedules the two processes (a fast
 * machine could otherwise finish one writer's posts before the other's first).
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { SophiaLive } from "../../src/layers/App.js"
import { Auth } from "../../src/services/Auth.js"
import { Coordination } from "../../src/services/Coordination.js"

const [db, bearer, channel, n, barrier, id, peer] = process.argv.slice(2)

const program = Effect.gen(function*() {
  const auth = yield* Auth
  const coordination = yield* Coordination
  const caller = yield* auth.authenticate(bearer)
  fs.writeFileSync(path.join(barrier, `ready-${id}`), "")
  while (!fs.existsSync(path.join(barrier, "go"))) yield* Effect.sleep("5 millis")
  const seqs: Array<number> = []
  for (let i = 0; i < Number(n); i++) {
    const row = yield* coordination.post(caller, { channel, kind: "status", body: `${id}:${i}` })
    seqs.push(row.channel_seq)
    if (i === 0 && peer !== undefined) {
      fs.writeFileSync(path.join(barrier, `posted-${id}`), "")
      // (a peer that failed never writes it: give up rather than outlive the test)
      const deadline = Date.now() + 30_000
      while (!fs.existsSync(path.join(barrier, `posted-${peer}`))) {
        if (Date.now() > deadline) return yield* Effect.die(new Error(`peer ${peer} never posted`))
        yield* Effect.sleep("1 millis")
      }
    }
  }
  process.stdout.write(JSON.stringify(seqs) + "\n")
})

Effect.runPromise(program.pipe(Effect.provide(SophiaLive(db)))).catch((e) => {
  console.error(e)
  process.exit(1)
})
