import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { ChildProcessWithoutNullStreams } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as readline from "node:readline"
import { SophiaLive } from "../src/layers/App.js"
import { Ledger } from "../src/services/Ledger.js"
import { connect } from "./support/Fixtures.js"

const ROUNDS = 150
const FREE_ATTEMPTS = 150

/** One writer process and a queue of the JSON lines it answered. */
const startWriter = (db: string, workId: string, tag: string, bearer: string) => {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ["--import", "tsx", path.join("test", "support", "ledger-writer.ts"), db, workId, tag],
    { env: { ...process.env, SOPHIA_BEARER: bearer }, stdio: ["pipe", "pipe", "pipe"] }
  )
  const waiting: Array<(v: any) => void> = []
  const buffered: Array<any> = []
  let stderr = ""
  child.stderr.on("data", (d) => (stderr += d))
  readline.createInterface({ input: child.stdout }).on("line", (line) => {
    const v = JSON.parse(line)
    const w = waiting.shift()
    if (w) w(v)
    else buffered.push(v)
  })
  const next = () =>
    new Promise<any>((resolve, reject) => {
      const b = buffered.shift()
      if (b !== undefined) return resolve(b)
      const timer = setTimeout(() => reject(new Error(`writer ${tag} did not answer: ${stderr}`)), 60_000)
      waiting.push((v) => {
        clearTimeout(timer)
        resolve(v)
      })
    })
  const send = (cmd: unknown) => child.stdin.write(JSON.stringify(cmd) + "\n")
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve))
  return { next, send, exited, kill: () => child.kill() }
}

describe("Ledger under a real concurrent writer", () => {
  it("two OS processes race on the same head: one winner per head, the loser gets head_moved, no fork", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-ledger-race-"))
    const db = path.join(dir, "race.db")
    const writers: Array<ReturnType<typeof startWriter>> = []
    try {
      const setup = await Effect.runPromise(Effect.gen(function*() {
        const ledger = yield* Ledger
        const a = yield* connect("writer-a")
        const b = yield* connect("writer-b")
        const created = yield* ledger.append(a.caller, {
          work_id: "race",
          expected_head: null,
          events: [{ type: "opened", title: "raced" }]
        })
        return { a: a.bearer, b: b.bearer, head: created.head, userId: a.caller.userId }
      }).pipe(Effect.provide(SophiaLive(db))))

      writers.push(startWriter(db, "race", "a", setup.a), startWriter(db, "race", "b", setup.b))
      await Promise.all(writers.map((w) => w.next())) // ready

      // lockstep: both are told to extend the same head at the same moment
      let head = setup.head
      const wins = { a: 0, b: 0 }
      for (let round = 0; round < ROUNDS; round++) {
        for (const w of writers) w.send({ op: "append", round, expected_head: head })
        const [ra, rb] = await Promise.all(writers.map((w) => w.next()))
        const winners = [ra, rb].filter((r) => r.ok)
        assert.strictEqual(winners.length, 1, `round ${round}: ${JSON.stringify([ra, rb])}`)
        const loser = ra.ok ? rb : ra
        assert.strictEqual(loser.tag, "HeadMoved", `round ${round}`)
        assert.strictEqual(loser.expected, head)
        assert.strictEqual(loser.actual, winners[0].head)
        assert.strictEqual(winners[0].seq, round + 2)
        if (ra.ok) wins.a++
        else wins.b++
        head = winners[0].head
      }

      // free-running: each process reads the head and tries to extend it, as fast as it can
      for (const w of writers) w.send({ op: "free", attempts: FREE_ATTEMPTS })
      const free = await Promise.all(writers.map((w) => w.next()))
      for (const w of writers) w.send({ op: "exit" })
      await Promise.all(writers.map((w) => w.exited))
      for (const f of free) {
        assert.deepStrictEqual(f.other, [])
        assert.strictEqual(f.wins + f.losses, FREE_ATTEMPTS)
      }
      const freeWins = free[0].wins + free[1].wins

      // the chain afterwards: one event per seq, each linked to the one before, and it verifies
      const after = await Effect.runPromise(Effect.gen(function*() {
        const ledger = yield* Ledger
        return {
          events: yield* ledger.events(setup.userId, "race"),
          report: yield* ledger.verify()
        }
      }).pipe(Effect.provide(SophiaLive(db))))
      assert.strictEqual(after.events.length, 1 + ROUNDS + freeWins)
      after.events.forEach((e, i) => {
        assert.strictEqual(e.seq, i + 1)
        assert.strictEqual(e.parent, i === 0 ? null : after.events[i - 1].hash)
      })
      assert.strictEqual(new Set(after.events.map((e) => e.parent)).size, after.events.length)
      assert.isTrue(after.report.ok, JSON.stringify(after.report))
      // both processes did win some rounds (it really was a race, not one writer)
      assert.isAbove(wins.a + free[0].wins, 0)
      assert.isAbove(wins.b + free[1].wins, 0)
    } finally {
      for (const w of writers) w.kill()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 240_000)
})
