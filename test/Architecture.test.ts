import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, type Exit, Layer, Queue } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Caller } from "../src/domain/Auth.js"
import { DEFAULT_COORDINATION_LIMITS } from "../src/domain/Coordination.js"
import type { DomainEvent } from "../src/domain/Events.js"
import { WaitCycle } from "../src/domain/Waits.js"
import { makeCore, makeServices } from "../src/layers/App.js"
import { mintPublishes, mintServices } from "../src/cli/Mint.js"
import { revocationServices } from "../src/cli/Revoke.js"
import { commandOn } from "../src/layers/Commands.js"
import { everySubscriber } from "../src/layers/Wiring.js"
import { CommandServicesOn } from "../src/layers/Services.js"
import { sqliteClient } from "../src/layers/Sql.js"
import { runMigrations } from "../src/layers/Migrations.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Auth } from "../src/services/Auth.js"
import { Coordination } from "../src/services/Coordination.js"
import { Events } from "../src/services/Events.js"
import { Leases } from "../src/services/Leases.js"
import { Ledger } from "../src/services/Ledger.js"
import { Waits } from "../src/services/Waits.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, tool: string, args: unknown = {}) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(Effect.map((o) => o.body as any))

const count = (table: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)}`.pipe(Effect.map((r) => Number(r[0].n)), Effect.orDie))

/**
 * A store that is nothing but a `SqlClient`: the bare SQLite client and the migrations, assembled here
 * (no `SqliteLive`, no store-specific tag). The core must need nothing else.
 */
const BareSqlClient: Layer.Layer<SqlClient.SqlClient> = Layer.effectDiscard(runMigrations).pipe(
  Layer.provideMerge(sqliteClient({ filename: ":memory:" })),
  Layer.orDie
)

describe("the store seam", () => {
  it.effect("the core builds from a layer that provides only SqlClient, and runs a post, an append and a wait", () =>
    Effect.gen(function*() {
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const wait = yield* call(a, "sophia.declare_wait", {
        on: "b",
        predicate: { type: "post_exists", channel: "arc:w1", kind: "status" },
        reason: "need b's status"
      })
      assert.isString(wait.wait_id)
      const appended = yield* call(b, "sophia.ledger_append", {
        work_id: "w1",
        expected_head: null,
        events: [{ type: "opened", title: "work" }, { type: "claimed" }]
      })
      assert.strictEqual(appended.seq, 2)
      const posted = yield* call(b, "sophia.coordination_post", { channel: "arc:w1", kind: "status", body: "done" })
      assert.strictEqual(posted.channel_seq, 1)
      const next = yield* call(a, "sophia.orient")
      assert.deepStrictEqual(next._wait_resolved.map((r: any) => [r.wait_id, r.resolution]), [[wait.wait_id, "satisfied"]])
      // the resolved wait on arc:w1 was observed on the work item w1, in the same transaction
      const status = yield* call(b, "sophia.ledger_status", { work_id: "w1" })
      assert.strictEqual(status.settled.fields.wait.evidence, "observed")
    }).pipe(Effect.provide(makeCore(BareSqlClient))))
})

/** A Ledger that records what it is asked and answers from memory: no ledger table is ever touched. */
const makeRecordingLedger = (calls: Array<string>) =>
  Layer.succeed(
    Ledger,
    Ledger.make({
      append: () => Effect.dieMessage("not in this fake"),
      observe: () => Effect.dieMessage("not in this fake"),
      requestReview: () => Effect.dieMessage("not in this fake"),
      giveVerdict: () => Effect.dieMessage("not in this fake"),
      status: () => Effect.dieMessage("not in this fake"),
      log: () => Effect.dieMessage("not in this fake"),
      diff: () => Effect.dieMessage("not in this fake"),
      verify: () => Effect.dieMessage("not in this fake"),
      events: () => Effect.succeed([]),
      state: () => Effect.succeed(undefined),
      countWork: (userId) => Effect.sync(() => (calls.push(`countWork ${userId}`), 42)),
      claimedBy: (_userId, connectionId) =>
        Effect.sync(() => {
          calls.push(`claimedBy ${connectionId}`)
          return [{ work_id: "fake-item", title: "from the fake", status: "open", head: "f".repeat(64), seq: 3 }]
        }),
      claimedByConnections: () => Effect.succeed(new Map()),
      listWork: () => Effect.succeed([]),
      orphanedWork: () => Effect.succeed([]),
      observesPost: () => true,
      observesWait: () => true,
      observePost: (post) => Effect.sync(() => void calls.push(`observePost ${post.channel} ${post.kind}`)),
      observeRevocation: (revoked) => Effect.sync(() => void calls.push(`observeRevocation ${revoked.connection_id}`)),
      observeWait: (resolved) => Effect.sync(() => void calls.push(`observeWait ${resolved.resolution}`))
    })
  )

describe("services are swappable", () => {
  const calls: Array<string> = []
  const WithFakeLedger = makeCore(BareSqlClient, undefined, makeServices(makeRecordingLedger(calls)))

  it.effect("with a fake Ledger, posts, waits, revocations and orient work and talk to it only through its methods", () =>
    Effect.gen(function*() {
      calls.length = 0
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      const wait = yield* call(a, "sophia.declare_wait", {
        on: "b",
        predicate: { type: "post_exists", channel: "arc:x", kind: "closeout" },
        reason: "handoff"
      })
      assert.isString(wait.wait_id)
      const closeout = yield* call(b, "sophia.coordination_post", {
        channel: "arc:x",
        kind: "closeout",
        body: "done",
        closeout: { review_requested: false }
      })
      assert.strictEqual(closeout.channel_seq, 1)
      const orient = yield* call(b, "sophia.orient")
      assert.strictEqual(orient.counts.work_items, 42)
      assert.deepStrictEqual(orient.my_claimed_work.map((w: any) => w.work_id), ["fake-item"])
      const auth = yield* Effect.flatMap(Effect.promise(() => import("../src/services/Auth.js")), (m) => m.Auth)
      yield* auth.revoke("b")
      assert.deepStrictEqual(calls, [
        "observePost waits status", // the wait's own fleet-wide post
        "observeWait satisfied",
        "observePost arc:x closeout",
        `countWork ${b.userId}`,
        `claimedBy ${b.connectionId}`,
        `observeRevocation ${b.connectionId}`
      ])
      // and the real ledger's tables were never written
      assert.strictEqual(yield* count("ledger_events"), 0)
    }).pipe(Effect.provide(WithFakeLedger)))
})

/**
 * A Coordination that keeps no table: the inbox's counts answered from memory, everything else refused.
 * The read model asks it through its methods, so the envelope and `orient` work over it unchanged.
 */
const makeCountingCoordination = (calls: Array<string>) =>
  Layer.succeed(
    Coordination,
    Coordination.make({
      post: () => Effect.dieMessage("not in this fake"),
      beacon: () => Effect.dieMessage("not in this fake"),
      inbox: () => Effect.dieMessage("not in this fake"),
      wouldReturn: () => () => false,
      watchUnread: () => Effect.dieMessage("not in this fake"),
      deliverNew: () => Effect.dieMessage("not in this fake"),
      deliverToMe: () => Effect.dieMessage("not in this fake"),
      countToMe: () => Effect.dieMessage("not in this fake"),
      receipts: () => Effect.dieMessage("not in this fake"),
      targetReceipts: () => Effect.dieMessage("not in this fake"),
      searchPosts: () => Effect.dieMessage("not in this fake"),
      indexPosts: () => Effect.void,
      rankPosts: () => Effect.dieMessage("not in this fake"),
      postHits: () => Effect.dieMessage("not in this fake"),
      postsPast: () => Effect.dieMessage("not in this fake"),
      postPositions: () => Effect.succeed([]),
      unreadCount: (caller) => Effect.sync(() => (calls.push(`unreadCount ${caller.name}`), 7)),
      unreadOf: () => Effect.dieMessage("not in this fake"),
      totals: (userId) => Effect.sync(() => (calls.push(`totals ${userId}`), { posts: 11, channels: 3 })),
      lastSeq: () => Effect.dieMessage("not in this fake"),
      firstPost: () => Effect.dieMessage("not in this fake"),
      postIdsOf: () => Effect.dieMessage("not in this fake"),
      recentChannels: () => Effect.dieMessage("not in this fake"),
      holdChannel: () => Effect.dieMessage("not in this fake"),
      // a minted connection starts where this fake says: nowhere (it keeps no table)
      onConnectionCreated: () => Effect.void,
      limits: DEFAULT_COORDINATION_LIMITS
    })
  )

describe("services are swappable: Coordination", () => {
  const calls: Array<string> = []
  const WithFakeInbox = makeCore(BareSqlClient, undefined, makeServices(undefined, makeCountingCoordination(calls)))

  it.effect("with an in-memory inbox, the envelope and orient read their counts from it, through its methods only", () =>
    Effect.gen(function*() {
      calls.length = 0
      const { caller: a } = yield* connect("a")
      const orient = yield* call(a, "sophia.orient")
      assert.strictEqual(orient._inbox_unread, 7)
      assert.strictEqual(orient.unread, 7)
      assert.deepStrictEqual([orient.counts.posts, orient.counts.channels], [11, 3])
      // a write's envelope too (the ledger never asks Coordination)
      const appended = yield* call(a, "sophia.ledger_append", { work_id: "w", expected_head: null, events: [{ type: "opened", title: "t" }] })
      assert.strictEqual(appended.seq, 1)
      assert.strictEqual(appended._inbox_unread, 7)
      assert.includeMembers(calls, [`totals ${a.userId}`, "unreadCount a"])
      // and the real inbox's tables were never touched
      assert.deepStrictEqual(yield* Effect.all([count("posts"), count("inbox_state"), count("post_counters")]), [0, 0, 0])
    }).pipe(Effect.provide(WithFakeInbox)))
})

describe("domain events", () => {
  const App = makeCore(BareSqlClient)
  const STORE_WIRING = [
    ["ConnectionCreated", "Coordination.onConnectionCreated", "atomic"],
    ["PostLanded", "Waits.onPostLanded", "atomic"],
    ["PostLanded", "Ledger.observePost", "isolated"],
    ["ConnectionRevoked", "Waits.onConnectionRevoked", "atomic"],
    ["ConnectionRevoked", "Ledger.observeRevocation", "isolated"],
    ["ConnectionRevoked", "Notifications.onConnectionRevoked", "atomic"],
    ["LeaseChanged", "Waits.onLeaseChanged", "atomic"],
    ["LeaseChanged", "Waits.onLeaseGranted", "refusing"],
    ["WaitResolved", "Ledger.observeWait", "isolated"],
    ["WaitResolved", "Notifications.onWaitResolved", "atomic"],
    ["ApprovalRequested", "Notifications.onApprovalRequested", "atomic"],
    ["ApprovalDecided", "Notifications.onApprovalDecided", "atomic"],
    ["ConnectionSilent", "Notifications.onConnectionSilent", "atomic"]
  ] as const
  const byEvent = (wiring: ReadonlyArray<readonly [string, string, string]>) => {
    const events: Record<string, Array<string>> = {}
    for (const [event, name, policy] of wiring) (events[event] ??= []).push(`${name} (${policy})`)
    return events
  }

  it.effect("the wiring is declared in one place, every subscriber with a named policy", () =>
    Effect.gen(function*() {
      const events = yield* Events
      // (the order that matters is each event's: its subscribers run in it)
      assert.deepStrictEqual(byEvent(events.wiring()), byEvent([["ConnectionRevoked", "Sandbox.onConnectionRevoked", "atomic"], ...STORE_WIRING]))
    }).pipe(Effect.provide(App)))

  // a `sophia` command (connection revoke, approvals approve…) writes every consequence a daemon's write would:
  // the same subscribers, less the daemon's in-memory one (no sandbox runs in a command's process)
  it.effect("a command runs every subscriber that writes, in the daemon's order", () =>
    Effect.gen(function*() {
      const events = yield* Events
      assert.deepStrictEqual(events.wiring(), [...STORE_WIRING])
    }).pipe(Effect.provide(CommandServicesOn({ filename: ":memory:" }).pipe(Layer.orDie))))

  // a command that builds only the services it asks (layers/Commands.ts) wires, for each event its writes
  // publish, the daemon's subscribers of that event — and publishes no other
  it.effect("a command on a few services wires the daemon's subscribers of the events it names, and no others", () =>
    Effect.gen(function*() {
      const minting = yield* Effect.map(Events, (events) => events.wiring()).pipe(
        Effect.provide(commandOn({ filename: ":memory:" }, mintServices, mintPublishes).pipe(Layer.orDie))
      )
      assert.deepStrictEqual(minting, STORE_WIRING.filter(([event]) => mintPublishes.events.includes(event)))
      assert.isNotEmpty(minting)
      const reading = yield* Effect.map(Events, (events) => events.wiring()).pipe(
        Effect.provide(commandOn({ filename: ":memory:" }, Auth.Default).pipe(Layer.orDie))
      )
      assert.deepStrictEqual(reading, [])
      // a revocation's layer: every subscriber that writes, as the daemon's
      const revoking = yield* Effect.map(Events, (events) => events.wiring()).pipe(
        Effect.provide(commandOn({ filename: ":memory:" }, revocationServices, everySubscriber).pipe(Layer.orDie))
      )
      assert.deepStrictEqual(revoking, [...STORE_WIRING])
    }))

  it.effect("a write that publishes an event its command's layer did not name dies whole: nothing is written", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const exit = yield* Effect.exit(auth.createConnection({ name: "a", profile: "full" }))
      assert.isTrue(exit._tag === "Failure" && Cause.isDie(exit.cause), "a defect, not a refusal")
      assert.include(String(Cause.squash((exit as Exit.Failure<unknown, unknown>).cause)), "not ConnectionCreated")
      // neither the connection (Auth's write) nor its user: the transaction rolled back
      assert.deepStrictEqual(yield* Effect.all([count("connections"), count("users")]), [0, 0])
      assert.deepStrictEqual(yield* auth.list(), [])
    }).pipe(Effect.provide(commandOn({ filename: ":memory:" }, mintServices).pipe(Layer.orDie))))

  it.effect("an atomic subscriber's failure inside a post's transaction leaves nothing half-written", () =>
    Effect.gen(function*() {
      const events = yield* Events
      const coordination = yield* Coordination
      const sql = yield* SqlClient.SqlClient
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      yield* coordination.post(a, { channel: "c", kind: "status", body: "first" })
      const before = yield* Effect.all([count("posts"), count("channel_counters"), count("inbox_state"), count("reads")])
      const unreadBefore = yield* coordination.unreadCount(b)
      yield* events.subscribe({
        on: "PostLanded",
        name: "test.fails",
        policy: "atomic",
        // it writes, then fails: its write and the post's must both be gone
        handle: (post) =>
          sql`UPDATE connections SET name = 'renamed' WHERE id = ${post.author}`.pipe(
            Effect.zipRight(Effect.fail("subscriber failed"))
          )
      })
      const exit = yield* Effect.exit(coordination.post(a, { channel: "c", kind: "status", body: "second" }))
      assert.isTrue(exit._tag === "Failure")
      assert.deepStrictEqual(
        yield* Effect.all([count("posts"), count("channel_counters"), count("inbox_state"), count("reads")]),
        before
      )
      assert.strictEqual(yield* coordination.unreadCount(b), unreadBefore)
      const inbox = yield* coordination.inbox(b, { channel: "c", peek: true })
      assert.deepStrictEqual(inbox.posts.map((p) => [p.body, p.channel_seq, p.agent_name]), [["first", 1, "a"]])
    }).pipe(Effect.provide(App)))

  it.effect("an isolated subscriber's failure undoes only its own writes; the post stands", () =>
    Effect.gen(function*() {
      const events = yield* Events
      const coordination = yield* Coordination
      const sql = yield* SqlClient.SqlClient
      const { caller: a } = yield* connect("a")
      yield* events.subscribe({
        on: "PostLanded",
        name: "test.isolated",
        policy: "isolated",
        handle: (post) =>
          sql`UPDATE connections SET name = 'renamed' WHERE id = ${post.author}`.pipe(
            Effect.zipRight(Effect.fail("subscriber failed"))
          )
      })
      const receipt = yield* coordination.post(a, { channel: "c", kind: "status", body: "stands" })
      assert.strictEqual(receipt.channel_seq, 1)
      const inbox = yield* coordination.inbox(a, { channel: "c", peek: true, unread_only: false } as any)
      assert.deepStrictEqual(inbox.posts.map((p) => [p.body, p.agent_name]), [["stands", "a"]])
    }).pipe(Effect.provide(App)))

  it.effect("a refusing subscriber's refusal is the write's refusal (publishOrRefuse), its own writes and the write's undone", () =>
    Effect.gen(function*() {
      const events = yield* Events
      const leases = yield* Leases
      const sql = yield* SqlClient.SqlClient
      const { caller: a } = yield* connect("a")
      yield* events.subscribe({
        on: "LeaseChanged",
        name: "test.refusing",
        policy: "refusing",
        when: (e) => e.change === "granted",
        handle: (e) =>
          sql`UPDATE connections SET name = 'renamed' WHERE id = ${e.connection_id}`.pipe(
            Effect.orDie,
            Effect.zipRight(Effect.fail(new WaitCycle({ cycle: [], resources: e.resources })))
          )
      })
      const before = yield* Effect.all([count("leases"), count("lease_holds")])
      const refused = yield* Effect.flip(leases.acquire(a, { resources: ["path:src/**"], reason: "r" }))
      assert.strictEqual(refused._tag, "WaitCycle")
      assert.deepStrictEqual(yield* Effect.all([count("leases"), count("lease_holds")]), before)
      const [row] = yield* sql<{ name: string }>`SELECT name FROM connections WHERE id = ${a.connectionId}`
      assert.strictEqual(row.name, "a")
    }).pipe(Effect.provide(App)))

  it.scoped("listeners hear committed events only, after the commit", () =>
    Effect.gen(function*() {
      const events = yield* Events
      const coordination = yield* Coordination
      const waits = yield* Waits
      const queue = yield* events.listen
      const { caller: a } = yield* connect("a")
      const { caller: b } = yield* connect("b")
      // a refused post (unknown recipient) publishes nothing
      yield* Effect.exit(coordination.post(a, { channel: "c", kind: "status", body: "x", to: "nobody" }))
      yield* waits.declare(a, { on: "b", predicate: { type: "seq_reached", channel: "c", seq: 1 }, reason: "r" })
      yield* coordination.post(b, { channel: "c", kind: "status", body: "y" })
      const heard: Array<DomainEvent> = [...(yield* Queue.takeAll(queue))]
      assert.deepStrictEqual(heard.map((e) => e._tag === "PostLanded" ? `${e._tag} ${e.channel}` : e._tag), [
        "ConnectionCreated",
        "ConnectionCreated",
        "PostLanded waits",
        "WaitResolved",
        "PostLanded c"
      ])
    }).pipe(Effect.provide(App)))
})

describe("the house rules", () => {
  const files = (dir: string): Array<string> =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(path.join(dir, e.name)) : [path.join(dir, e.name)]
    )
  const src = path.join(__dirname, "..", "src")

  it("src/services imports nothing from src/mcp", () => {
    const offenders = files(path.join(src, "services")).filter((f) => /from\s+["']\.\.\/mcp\//.test(fs.readFileSync(f, "utf8")))
    assert.deepStrictEqual(offenders.map((f) => path.relative(src, f)), [])
  })

  it("no file outside src/layers names the SQLite client", () => {
    const offenders = files(src)
      .filter((f) => !f.startsWith(path.join(src, "layers") + path.sep))
      .filter((f) => /better-sqlite3|sql-sqlite-node|layers\/Sql(\.js)?["']/.test(fs.readFileSync(f, "utf8")))
    assert.deepStrictEqual(offenders.map((f) => path.relative(src, f)), [])
  })

  it("no service registers callbacks on another (no onPost / onRevoke hooks)", () => {
    const offenders = files(path.join(src, "services")).filter((f) => /\bon(Post|Revoke)\s*\(/.test(fs.readFileSync(f, "utf8")))
    assert.deepStrictEqual(offenders.map((f) => path.relative(src, f)), [])
  })
})
