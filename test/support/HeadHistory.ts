/**
 * Recording histories of the ledger's head register from concurrent clients, for the linearizability
 * checker (test/support/Linearizability.ts): the real store over REST, and a deliberately broken store
 * (the compare-and-swap removed) that the checker must catch.
 */
import Sqlite from "better-sqlite3"
import { createHash, randomUUID } from "node:crypto"
import { performance } from "node:perf_hooks"
import type { HeadInput, HeadOutput, Operation } from "./Linearizability.js"

/** What a client can do to a head register. */
export interface HeadStore {
  readonly append: (workId: string, expected: string | null) => Promise<HeadOutput>
  readonly read: (workId: string) => Promise<HeadOutput>
}

/** A small deterministic PRNG (mulberry32), so a failing history can be replayed from its seed. */
export const rng = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** POST a tool call to a daemon's REST path. */
export const restCall = async (baseUrl: string, bearer: string, tool: string, args: unknown) => {
  const r = await fetch(`${baseUrl}/api/tools/${tool}`, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify(args)
  })
  return { status: r.status, body: (await r.json()) as any }
}

/** The real ledger through a daemon's REST path: `ledger_append` (one asserted event) and `ledger_status`. */
export const restHeadStore = (baseUrl: string, bearer: string): HeadStore => {
  let n = 0
  return {
    append: async (workId, expected) => {
      const r = await restCall(baseUrl, bearer, "sophia.ledger_append", {
        work_id: workId,
        expected_head: expected,
        events: [{ type: "asserted", field: "n", value: n++ }]
      })
      if (r.status === 200) return { ok: true, head: r.body.head }
      if (r.body?.error?.code === "head_moved") return { ok: false, actual: r.body.error.actual ?? null }
      throw new Error(`ledger_append: ${r.status} ${JSON.stringify(r.body)}`)
    },
    read: async (workId) => {
      const r = await restCall(baseUrl, bearer, "sophia.ledger_status", { work_id: workId })
      if (r.status === 200) return { ok: true, head: r.body.settled.head }
      throw new Error(`ledger_status: ${r.status} ${JSON.stringify(r.body)}`)
    }
  }
}

/**
 * A deliberately broken head register over a real SQLite file: it reads the head, yields (as any store
 * that awaits between statements does), compares, and then writes the new head unconditionally — the
 * compare-and-swap removed. Correct when used by one client at a time; loses updates under concurrency.
 */
export const brokenHeadStore = (filename: string): HeadStore & { readonly close: () => void; readonly create: (workId: string) => string } => {
  const db = new Sqlite(filename)
  db.pragma("journal_mode = WAL")
  db.exec("CREATE TABLE IF NOT EXISTS heads (work_id TEXT PRIMARY KEY, head TEXT NOT NULL)")
  const select = db.prepare<[string], { head: string }>("SELECT head FROM heads WHERE work_id = ?")
  const update = db.prepare("UPDATE heads SET head = ? WHERE work_id = ?") // no `AND head = ?`: the CAS is gone
  const gap = () => new Promise<void>((resolve) => setImmediate(resolve))
  return {
    create: (workId) => {
      const head = createHash("sha256").update(workId).digest("hex")
      db.prepare("INSERT INTO heads (work_id, head) VALUES (?, ?)").run(workId, head)
      return head
    },
    append: async (workId, expected) => {
      const current = select.get(workId)?.head ?? null
      await gap()
      if (current !== expected) return { ok: false, actual: current }
      const head = createHash("sha256").update(`${current}:${randomUUID()}`).digest("hex")
      update.run(head, workId)
      return { ok: true, head }
    },
    read: async (workId) => ({ ok: true, head: select.get(workId)?.head ?? null }),
    close: () => db.close()
  }
}

export interface RecordOptions {
  /** one store per client (a client may share its store with others) */
  readonly stores: ReadonlyArray<HeadStore>
  readonly opsPerClient: number
  readonly workIds: ReadonlyArray<string>
  /** each client's starting belief about each head */
  readonly initial: (workId: string) => string | null
  readonly seed: number
  /** share of reads among operations (the rest are appends) */
  readonly readShare?: number
}

/**
 * Run the clients concurrently and record every operation with its invocation and completion time (one
 * clock, this process's). A client appends on the head it last saw for the item (stale ones are refused
 * with `head_moved`, which tells it the actual head) or reads it.
 */
export const recordHistory = async (options: RecordOptions): Promise<Array<Operation<HeadInput, HeadOutput>>> => {
  const history: Array<Operation<HeadInput, HeadOutput>> = []
  const random = rng(options.seed)
  const readShare = options.readShare ?? 0.3
  await Promise.all(options.stores.map(async (store, client) => {
    const belief = new Map(options.workIds.map((w) => [w, options.initial(w)]))
    for (let i = 0; i < options.opsPerClient; i++) {
      const workId = options.workIds[Math.floor(random() * options.workIds.length)]
      const input: HeadInput = random() < readShare
        ? { kind: "read", work_id: workId }
        : { kind: "append", work_id: workId, expected: belief.get(workId)! }
      const call = performance.now()
      const output = input.kind === "read" ? await store.read(workId) : await store.append(workId, input.expected)
      const ret = performance.now()
      history.push({ client, input, output, call, ret })
      belief.set(workId, output.ok ? output.head : output.actual)
    }
  }))
  return history
}

/**
 * A linearizable history of a correct head register, simulated: each operation takes effect at a random
 * instant inside its own random interval, in that order. For timing the checker on large histories.
 */
export const simulatedHistory = (options: {
  readonly clients: number
  readonly operations: number
  readonly workIds: ReadonlyArray<string>
  readonly seed: number
}): { history: Array<Operation<HeadInput, HeadOutput>>; initial: (workId: string) => string } => {
  const random = rng(options.seed)
  const initial = (w: string) => `h0-${w}`
  const heads = new Map(options.workIds.map((w) => [w, initial(w)]))
  const beliefs = Array.from({ length: options.clients }, () => new Map(heads))
  const clock = new Array<number>(options.clients).fill(0)
  // draft every operation's interval and effect instant, then apply effects in instant order
  const drafts: Array<{ client: number; workId: string; read: boolean; call: number; at: number; ret: number }> = []
  for (let i = 0; i < options.operations; i++) {
    const client = i % options.clients
    const call = clock[client] + random() * 2
    const ret = call + 0.1 + random() * 3
    drafts.push({ client, workId: options.workIds[Math.floor(random() * options.workIds.length)], read: random() < 0.3, call, at: call + random() * (ret - call), ret })
    clock[client] = ret
  }
  const order = drafts.map((_, i) => i).sort((a, b) => drafts[a].at - drafts[b].at)
  const results = new Array<Operation<HeadInput, HeadOutput>>(drafts.length)
  let n = 0
  // beliefs are per client and in each client's own program order, which the instants respect
  for (const i of order) {
    const d = drafts[i]
    const belief = beliefs[d.client]
    const current = heads.get(d.workId)!
    let input: HeadInput
    let output: HeadOutput
    if (d.read) {
      input = { kind: "read", work_id: d.workId }
      output = { ok: true, head: current }
    } else {
      const expected = belief.get(d.workId)!
      input = { kind: "append", work_id: d.workId, expected }
      if (expected === current) {
        const head = `h${++n}`
        heads.set(d.workId, head)
        output = { ok: true, head }
      } else {
        output = { ok: false, actual: current }
      }
    }
    belief.set(d.workId, output.ok ? output.head! : output.actual!)
    results[i] = { client: d.client, input, output, call: d.call, ret: d.ret }
  }
  return { history: results, initial }
}
