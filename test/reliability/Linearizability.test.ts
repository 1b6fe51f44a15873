/**
 * Linearizability of the ledger's head register: histories recorded from 8 concurrent clients (on two
 * daemons sharing one SQLite file) are checked against the model "compare-and-swap on the head"; the same
 * harness on a store with the CAS removed must be caught, so the checker is known to bite.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { sophia, tempDb } from "../support/Cli.js"
import type { Daemon } from "../support/Daemon.js"
import { startDaemon } from "../support/Daemon.js"
import { brokenHeadStore, recordHistory, restCall, restHeadStore, simulatedHistory } from "../support/HeadHistory.js"
import type { HeadInput, HeadOutput, Operation } from "../support/Linearizability.js"
import { checkLinearizable, headRegister } from "../support/Linearizability.js"
import { LINEARIZABILITY_OPS_PER_CLIENT, report, SEED, SOAK } from "./Mode.js"

const CLIENTS = 8
const op = (client: number, input: HeadInput, output: HeadOutput, call: number, ret: number): Operation<HeadInput, HeadOutput> => ({
  client,
  input,
  output,
  call,
  ret
})
const append = (expected: string | null): HeadInput => ({ kind: "append", work_id: "w", expected })
const read: HeadInput = { kind: "read", work_id: "w" }
const model = headRegister(() => "h0")

describe("the linearizability checker", () => {
  it("accepts overlapping operations that can be ordered, refuses ones that cannot", () => {
    // two racing appends on h0: one wins, the other sees the winner's head — in either overlap
    const race = [
      op(0, append("h0"), { ok: true, head: "h1" }, 0, 10),
      op(1, append("h0"), { ok: false, actual: "h1" }, 1, 9)
    ]
    assert.isTrue(checkLinearizable(model, race).ok)
    // both win on the same head: no order explains it (a lost update)
    const lost = [
      op(0, append("h0"), { ok: true, head: "h1" }, 0, 10),
      op(1, append("h0"), { ok: true, head: "h2" }, 1, 9)
    ]
    assert.isFalse(checkLinearizable(model, lost).ok)
    // a read overlapping the append may see either head, but one strictly after it must see the new one
    const overlapping = [op(0, append("h0"), { ok: true, head: "h1" }, 0, 10), op(1, read, { ok: true, head: "h0" }, 5, 6)]
    assert.isTrue(checkLinearizable(model, overlapping).ok)
    const stale = [op(0, append("h0"), { ok: true, head: "h1" }, 0, 10), op(1, read, { ok: true, head: "h0" }, 11, 12)]
    assert.isFalse(checkLinearizable(model, stale).ok)
    // a refusal must name the head as it was: "h0" cannot be refused while the head is h0
    const wrongRefusal = [op(0, append("h0"), { ok: false, actual: "h0" }, 0, 1)]
    assert.isFalse(checkLinearizable(model, wrongRefusal).ok)
    // a read that saw a value nobody wrote
    assert.isFalse(checkLinearizable(model, [op(0, read, { ok: true, head: "hx" }, 0, 1)]).ok)
    // order matters only within a partition: another item's history is independent
    const twoItems = [
      op(0, { kind: "append", work_id: "a", expected: "h0" }, { ok: true, head: "a1" }, 0, 1),
      op(1, { kind: "append", work_id: "b", expected: "h0" }, { ok: true, head: "b1" }, 0, 1)
    ]
    assert.deepStrictEqual(checkLinearizable(model, twoItems), { ok: true, partitions: 2, operations: 2 })
  })

  it("catches a deliberately broken store (the compare-and-swap removed) under 8 concurrent clients", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-broken-"))
    const store = brokenHeadStore(path.join(dir, "broken.db"))
    try {
      const heads = new Map(["x", "y"].map((w) => [w, store.create(w)]))
      const initial = (w: string) => heads.get(w)!
      const history = await recordHistory({
        stores: Array.from({ length: CLIENTS }, () => store),
        opsPerClient: 50,
        workIds: ["x", "y"],
        initial,
        seed: SEED,
        readShare: 0.2
      })
      const verdict = checkLinearizable(headRegister(initial), history)
      assert.isFalse(verdict.ok, `the checker must catch lost updates (seed ${SEED})`)
      // the same store used by one client at a time is a correct register: the checker is not just refusing
      const alone = brokenHeadStore(path.join(dir, "alone.db"))
      try {
        const single = new Map(["x"].map((w) => [w, alone.create(w)]))
        const sequential = await recordHistory({
          stores: [alone],
          opsPerClient: 200,
          workIds: ["x"],
          initial: (w) => single.get(w)!,
          seed: SEED
        })
        assert.isTrue(checkLinearizable(headRegister((w) => single.get(w)!), sequential).ok)
      } finally {
        alone.close()
      }
    } finally {
      store.close()
    }
  })

  it("checks a 10,000-operation history of 8 clients in bounded time", () => {
    const { history, initial } = simulatedHistory({ clients: CLIENTS, operations: 10_000, workIds: ["a", "b", "c"], seed: SEED })
    const started = performance.now()
    const verdict = checkLinearizable(headRegister(initial), history)
    const ms = performance.now() - started
    assert.isTrue(verdict.ok)
    report("linearizability checker", { operations: history.length, clients: CLIENTS, ms: ms.toFixed(0), history: "simulated" })
    assert.isBelow(ms, 60_000)
  })
})

describe("the ledger's head register", () => {
  it(`is linearizable: ${CLIENTS} concurrent clients over REST on two daemons sharing one SQLite file`, async () => {
    const db = tempDb()
    const daemons: Array<Daemon> = []
    try {
      const first = await startDaemon(db)
      daemons.push(first)
      const second = await startDaemon(db)
      daemons.push(second)
      const bearer = first.ownerBearer!
      assert.isDefined(bearer)
      const workIds = ["lin-a", "lin-b", "lin-c"]
      const heads = new Map<string, string>()
      for (const workId of workIds) {
        const r = await restCall(first.baseUrl, bearer, "sophia.ledger_append", {
          work_id: workId,
          expected_head: null,
          events: [{ type: "opened", title: workId }]
        })
        assert.strictEqual(r.status, 200, JSON.stringify(r.body))
        heads.set(workId, r.body.head)
      }
      const initial = (w: string) => heads.get(w)!
      const stores = Array.from({ length: CLIENTS }, (_, i) => restHeadStore(daemons[i % 2].baseUrl, bearer))
      const recordStart = performance.now()
      const history = await recordHistory({ stores, opsPerClient: LINEARIZABILITY_OPS_PER_CLIENT, workIds, initial, seed: SEED })
      const recordMs = performance.now() - recordStart
      const started = performance.now()
      const verdict = checkLinearizable(headRegister(initial), history)
      const ms = performance.now() - started
      const wins = history.filter((o) => o.input.kind === "append" && o.output.ok).length
      const refused = history.filter((o) => !o.output.ok).length
      report("linearizability ledger", {
        operations: history.length,
        clients: CLIENTS,
        daemons: 2,
        appends_won: wins,
        head_moved: refused,
        record_ms: recordMs.toFixed(0),
        checker_ms: ms.toFixed(0),
        seed: SEED
      })
      assert.isTrue(verdict.ok, `not linearizable (seed ${SEED}): ${JSON.stringify(verdict)}`)
      assert.isAbove(wins, 0)
      assert.isAbove(refused, 0, "the clients raced (some appends were refused with head_moved)")
    } finally {
      await Promise.all(daemons.map((d) => d.kill("SIGTERM")))
    }
    const verify = sophia(["ledger", "verify", "--db", db])
    assert.strictEqual(verify.status, 0, verify.stdout + verify.stderr)
  }, SOAK ? 1_800_000 : 300_000)
})
