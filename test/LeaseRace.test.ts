/**
 * Leases race-free across processes on one SQLite file: 20 OS processes, each with its own connections to the
 * file through the compiled library, ask for the same exclusive lease at the same moment — exactly one wins,
 * every other is refused naming the winner; then for one slot of capacity 3 — exactly 3 win; then for a
 * multi-resource lease overlapping a held one — none wins, nothing is left half-held.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { SophiaLive } from "../src/layers/App.js"
import { Auth } from "../src/services/Auth.js"
import { Leases } from "../src/services/Leases.js"
import type { RaceOutcome } from "./support/LeaseRace.js"
import { raceLeases } from "./support/LeaseRace.js"

const RACERS = 20

const winners = (round: ReadonlyArray<RaceOutcome>) => round.filter((o): o is { lease_id: string } => "lease_id" in o)

describe("leases across OS processes on one SQLite file", () => {
  it("20 processes race: one exclusive winner; a slot of 3 admits exactly 3; an all-or-nothing loser holds nothing", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-lease-race-"))
    const db = path.join(dir, "race.db")
    const runtime = ManagedRuntime.make(SophiaLive(db))
    try {
      const bearers = await runtime.runPromise(Effect.forEach(
        Array.from({ length: RACERS }, (_, i) => i),
        (i) => Effect.map(Effect.flatMap(Auth, (a) => a.createConnection({ name: `racer-${i}`, profile: "full" })), (m) => m.bearer)
      ))
      const [exclusive, slot, both] = await raceLeases("direct", () => db, bearers, [
        { resources: ["path:src/**"], reason: "race" },
        { resources: ["slot:build"], mode: "shared", capacity: 3, reason: "race" },
        { resources: ["path:docs/a.md", "path:src/x.ts"], reason: "both" }
      ])

      const won = winners(exclusive)
      assert.lengthOf(won, 1, JSON.stringify(exclusive))
      for (const o of exclusive) {
        if ("code" in o) {
          assert.strictEqual(o.code, "lease_conflict")
          assert.deepStrictEqual(o.holders.map((h) => h.lease_id), [won[0].lease_id])
        }
      }
      assert.lengthOf(winners(slot), 3, JSON.stringify(slot))
      assert.isTrue(slot.every((o) => "lease_id" in o || o.code === "lease_conflict"))
      // src/x.ts is held by the first round's winner: nobody gets docs/a.md either (all or nothing), except
      // that winner itself (its own lease is not in its way)
      const third = winners(both)
      assert.isAtMost(third.length, 1)
      const held = await runtime.runPromise(Effect.flatMap(Leases, (l) =>
        Effect.flatMap(Effect.flatMap(Auth, (a) => a.authenticate(bearers[0])), (me) => l.list(me, {}))))
      const docs = held.leases.filter((l) => l.resources.includes("path:docs/a.md"))
      assert.strictEqual(docs.length, third.length)
      assert.strictEqual(held.leases.filter((l) => l.resources.includes("path:src/**")).length, 1)
      assert.strictEqual(held.leases.filter((l) => l.resources.includes("slot:build")).length, 3)
    } finally {
      await runtime.dispose()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 300_000)
})
