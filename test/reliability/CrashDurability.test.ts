/**
 * Crash durability: a real `sophia serve` process on a SQLite file, under concurrent posts and ledger
 * appends from several clients, is SIGKILLed at random moments and restarted, cycle after cycle. Afterwards
 * every acknowledged write is present, every channel's `channel_seq` is gapless, every acknowledged head
 * is an ancestor of its item's current head, and `sophia ledger verify` is clean.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { performance } from "node:perf_hooks"
import { SOPHIA, sophia, tempDb } from "../support/Cli.js"
import type { Daemon } from "../support/Daemon.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall, rng } from "../support/HeadHistory.js"
import { CRASH_CYCLES, report, SEED, SOAK } from "./Mode.js"

const CLIENTS = 4
const CHANNELS = ["crash-0", "crash-1"]
const SHARED = "crash-shared"
const workOf = (client: number) => `crash-w${client}`

/** `sophia connection create` as a child process; its bearer. */
const mint = (db: string, name: string) =>
  new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [SOPHIA, "connection", "create", "--name", name, "--profile", "full", "--db", db], {
      env: { ...process.env, SOPHIA_DATABASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    child.once("exit", (code) => code === 0 ? resolve(JSON.parse(out).bearer) : reject(new Error(`connection create: ${err}`)))
  })

interface AckedPost {
  readonly post_id: string
  readonly channel: string
  readonly channel_seq: number
}
interface AckedHead {
  readonly work_id: string
  readonly head: string
  readonly seq: number
}

/**
 * One client's load until the daemon dies under it: posts on two shared channels, appends on its own work
 * item and on one item every client races for. Only replies received count as acknowledged.
 */
const runClient = async (
  baseUrl: string,
  bearer: string,
  client: number,
  heads: Map<string, string>,
  acked: { posts: Array<AckedPost>; heads: Array<AckedHead> },
  random: () => number,
  stop: { stopped: boolean }
) => {
  let n = 0
  while (!stop.stopped) {
    const roll = random()
    try {
      if (roll < 0.5) {
        const channel = CHANNELS[Math.floor(random() * CHANNELS.length)]
        const r = await restCall(baseUrl, bearer, "sophia.coordination_post", {
          channel,
          kind: "status",
          body: `client ${client} post ${n++}`
        })
        assert.strictEqual(r.status, 200, JSON.stringify(r.body))
        acked.posts.push({ post_id: r.body.post_id, channel, channel_seq: r.body.channel_seq })
      } else {
        const workId = roll < 0.85 ? workOf(client) : SHARED
        const r = await restCall(baseUrl, bearer, "sophia.ledger_append", {
          work_id: workId,
          expected_head: heads.get(workId),
          events: [{ type: "asserted", field: `c${client}`, value: n++ }]
        })
        if (r.status === 200) {
          heads.set(workId, r.body.head)
          acked.heads.push({ work_id: workId, head: r.body.head, seq: r.body.seq })
        } else {
          // a lost race, or our own write that committed before the last crash without its reply
          assert.strictEqual(r.body?.error?.code, "head_moved", JSON.stringify(r.body))
          heads.set(workId, r.body.error.actual)
        }
      }
    } catch (error) {
      if (error instanceof Error && error.name === "AssertionError") throw error
      return // the daemon died under this request: it is not acknowledged
    }
  }
}

/** Every post of a channel, in channel_seq order, through the inbox's history view. */
const channelPosts = async (baseUrl: string, bearer: string, channel: string) => {
  // the conversation view returns the newest `limit` posts; `before_seq` pages back to the first
  const posts: Array<{ post_id: string; channel_seq: number }> = []
  let before: number | undefined
  for (;;) {
    const r = await restCall(baseUrl, bearer, "sophia.coordination_inbox", {
      channel,
      unread_only: false,
      peek: true,
      limit: 200,
      ...(before !== undefined ? { before_seq: before } : {})
    })
    assert.strictEqual(r.status, 200, JSON.stringify(r.body))
    const page: Array<{ post_id: string; channel_seq: number }> = r.body.posts.map((p: any) => ({ post_id: p.post_id, channel_seq: p.channel_seq }))
    if (page.length === 0) return posts.sort((a, b) => a.channel_seq - b.channel_seq)
    posts.push(...page)
    before = Math.min(...page.map((p) => p.channel_seq))
    if (before <= 1) return posts.sort((a, b) => a.channel_seq - b.channel_seq)
  }
}

/** Every event of a work item, oldest first, through ledger_log's pages. */
const ledgerEvents = async (baseUrl: string, bearer: string, workId: string) => {
  const events: Array<{ seq: number; parent: string | null; hash: string }> = []
  let before: number | undefined
  for (;;) {
    const r = await restCall(baseUrl, bearer, "sophia.ledger_log", {
      work_id: workId,
      limit: 200,
      ...(before !== undefined ? { before_seq: before } : {})
    })
    assert.strictEqual(r.status, 200, JSON.stringify(r.body))
    events.push(...r.body.events.map((e: any) => ({ seq: e.seq, parent: e.parent, hash: e.hash })))
    if (r.body.next_before_seq === null) return { head: r.body.head as string, events: events.reverse() }
    before = r.body.next_before_seq
  }
}

describe("crash durability", () => {
  it(`every acknowledged write survives ${CRASH_CYCLES} SIGKILLs of a loaded daemon`, async () => {
    const db = tempDb()
    const random = rng(SEED)
    const started = performance.now()
    const bearers = [await mint(db, "crash-a"), await mint(db, "crash-b")]
    const acked = { posts: [] as Array<AckedPost>, heads: [] as Array<AckedHead> }
    const heads = Array.from({ length: CLIENTS }, () => new Map<string, string>())
    let daemon: Daemon | undefined
    try {
      for (let cycle = 0; cycle < CRASH_CYCLES; cycle++) {
        daemon = await startDaemon(db)
        const { baseUrl } = daemon
        if (cycle === 0) {
          for (const workId of [SHARED, ...Array.from({ length: CLIENTS }, (_, c) => workOf(c))]) {
            const r = await restCall(baseUrl, bearers[0], "sophia.ledger_append", {
              work_id: workId,
              expected_head: null,
              events: [{ type: "opened", title: workId }]
            })
            assert.strictEqual(r.status, 200, JSON.stringify(r.body))
            acked.heads.push({ work_id: workId, head: r.body.head, seq: r.body.seq })
            for (const h of heads) h.set(workId, r.body.head)
          }
        }
        const stop = { stopped: false }
        const clients = Array.from({ length: CLIENTS }, (_, c) =>
          runClient(baseUrl, bearers[c % bearers.length], c, heads[c], acked, rng(SEED + cycle * 97 + c), stop))
        // SIGKILL at a random moment of the load
        await new Promise((resolve) => setTimeout(resolve, 300 + random() * 1700))
        const code = await daemon.kill("SIGKILL")
        assert.isNull(code, "killed by the signal")
        daemon = undefined
        stop.stopped = true
        await Promise.all(clients)
      }

      // the last restart: everything acknowledged is there, and consistent
      daemon = await startDaemon(db)
      const reader = bearers[0]
      let lost = 0
      for (const channel of CHANNELS) {
        const posts = await channelPosts(daemon.baseUrl, reader, channel)
        posts.forEach((p, i) => assert.strictEqual(p.channel_seq, i + 1, `${channel}: channel_seq gapless and unique`))
        const bySeq = new Map(posts.map((p) => [p.channel_seq, p.post_id]))
        for (const a of acked.posts.filter((p) => p.channel === channel)) {
          if (bySeq.get(a.channel_seq) !== a.post_id) lost++
        }
      }
      for (const workId of [SHARED, ...Array.from({ length: CLIENTS }, (_, c) => workOf(c))]) {
        const { events, head } = await ledgerEvents(daemon.baseUrl, reader, workId)
        events.forEach((e, i) => {
          assert.strictEqual(e.seq, i + 1, `${workId}: seq gapless`)
          assert.strictEqual(e.parent, i === 0 ? null : events[i - 1].hash, `${workId}: each event extends the one before`)
        })
        assert.strictEqual(head, events.at(-1)?.hash, `${workId}: the head is the last event`)
        // on one linear chain ending at the head, an acknowledged head at its seq is an ancestor of the head
        for (const a of acked.heads.filter((h) => h.work_id === workId)) {
          if (events[a.seq - 1]?.hash !== a.head) lost++
        }
      }
      const seconds = (performance.now() - started) / 1000
      report("crash durability", {
        cycles: CRASH_CYCLES,
        acked_posts: acked.posts.length,
        acked_appends: acked.heads.length,
        lost,
        seconds: seconds.toFixed(0),
        seed: SEED
      })
      assert.strictEqual(lost, 0, "every acknowledged write is present")
      assert.isAbove(acked.posts.length + acked.heads.length, CRASH_CYCLES, "the daemon was under load when killed")
    } finally {
      if (daemon) await daemon.kill("SIGTERM")
    }
    const verify = sophia(["ledger", "verify", "--db", db])
    assert.strictEqual(verify.status, 0, verify.stdout + verify.stderr)
    assert.isTrue(JSON.parse(verify.stdout.trim().split("\n").at(-1)!).ok)
  }, SOAK ? 3_600_000 : 600_000)
})
