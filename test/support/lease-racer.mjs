/**
 * One OS process of a lease race (test/LeaseRace.test.ts, test/postgres/LeaseRace.test.ts): makes one
 * `sophia.lease_acquire` call per round, all processes of a round released at once by a file barrier.
 *
 *   node test/support/lease-racer.mjs direct <db-file> <bearer> <barrier-dir> <id> <rounds-json>
 *   node test/support/lease-racer.mjs rest <base-url> <bearer> <barrier-dir> <id> <rounds-json>
 *
 * `direct`: the compiled library (dist/) on the SQLite file, its own process and its own connections to the
 * file; `rest`: a daemon's REST path. For each round r it writes `<barrier>/ready-<id>-<r>`, waits for
 * `<barrier>/go-<r>`, calls, and at the end prints one JSON array: per round `{ lease_id }` or `{ code, holders }`.
 */
import * as fs from "node:fs"
import * as path from "node:path"

const [mode, target, bearer, barrier, id, roundsJson] = process.argv.slice(2)
const rounds = JSON.parse(roundsJson)

const until = async (file) => {
  const deadline = Date.now() + 120_000
  while (!fs.existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`no ${file}`)
    await new Promise((r) => setTimeout(r, 2))
  }
}

const outcomeOf = (body) =>
  body.error === undefined ? { lease_id: body.lease_id } : { code: body.error.code, holders: body.error.holders ?? [] }

const caller = async () => {
  if (mode === "rest") {
    return async (args) => {
      const r = await fetch(`${target}/api/tools/sophia.lease_acquire`, {
        method: "POST",
        headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
        body: JSON.stringify(args)
      })
      return outcomeOf(await r.json())
    }
  }
  const lib = await import(new URL("../../dist/index.js", import.meta.url).href)
  const { Effect, ManagedRuntime } = await import("effect")
  const runtime = ManagedRuntime.make(lib.SophiaLive(target))
  const me = await runtime.runPromise(Effect.flatMap(lib.Auth, (auth) => auth.authenticate(bearer)))
  return (args) =>
    runtime.runPromise(Effect.flatMap(lib.Dispatcher, (d) => d.call(me, "sophia.lease_acquire", args))).then((o) => outcomeOf(o.body))
}

const call = await caller()
const out = []
for (let r = 0; r < rounds.length; r++) {
  fs.writeFileSync(path.join(barrier, `ready-${id}-${r}`), "")
  await until(path.join(barrier, `go-${r}`))
  out.push(await call(rounds[r]))
}
process.stdout.write(JSON.stringify(out) + "\n")
process.exit(0)
