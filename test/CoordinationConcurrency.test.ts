import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SophiaLive } from "../src/layers/App.js"
import { Auth } from "../src/services/Auth.js"
import { runCoordinationWriter } from "./support/OtherProcess.js"

const N = 150

describe("Coordination: channel_seq across OS processes", () => {
  it.live("two processes posting to one channel of one SQLite file get gapless, unique seqs", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-seq-"))
      const db = path.join(dir, "sophia.db")
      const bearers = yield* Effect.gen(function*() {
        const auth = yield* Auth
        const a = yield* auth.createConnection({ name: "writer-a", profile: "full" })
        const b = yield* auth.createConnection({ name: "writer-b", profile: "full" })
        return [a.bearer, b.bearer]
      }).pipe(Effect.provide(SophiaLive(db)))

      const writers = Effect.promise(() =>
        Promise.all(bearers.map((bearer, i) => runCoordinationWriter([db, bearer, "arc:race", String(N), dir, String(i), String(1 - i)])))
      )
      const release = Effect.gen(function*() {
        while (!(fs.existsSync(path.join(dir, "ready-0")) && fs.existsSync(path.join(dir, "ready-1")))) {
          yield* Effect.sleep("20 millis")
        }
        fs.writeFileSync(path.join(dir, "go"), "")
      })
      const [seqs] = yield* Effect.all([writers, release], { concurrency: 2 })

      // each process saw its own seqs strictly increasing
      for (const s of seqs) {
        assert.strictEqual(s.length, N)
        for (let i = 1; i < s.length; i++) assert.isAbove(s[i], s[i - 1])
      }
      const all = [...seqs[0], ...seqs[1]].sort((x, y) => x - y)
      assert.deepStrictEqual(all, Array.from({ length: 2 * N }, (_, i) => i + 1))
      // the writes really interleaved (otherwise this test proves nothing about the race)
      const firstOfB = Math.min(...seqs[1])
      const firstOfA = Math.min(...seqs[0])
      assert.isTrue(
        seqs[0].some((s) => s > firstOfB) && seqs[1].some((s) => s > firstOfA),
        "the two writers did not overlap"
      )

      const stored = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ channel_seq: number; n: number }>`SELECT channel_seq FROM posts WHERE channel = 'arc:race' ORDER BY channel_seq`
      }).pipe(Effect.provide(SophiaLive(db)))
      assert.deepStrictEqual(stored.map((r) => Number(r.channel_seq)), all)
      fs.rmSync(dir, { recursive: true, force: true })
    }), 120_000)
})
