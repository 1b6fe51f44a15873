/**
 * The owner's view of approvals (services/approvals/OwnerView.ts) on whichever store the suite runs
 * (test/ApprovalPages.test.ts on SQLite, test/postgres/ApprovalPages.test.ts on Postgres): pending approvals a
 * page at a time, newest first, exactly once across the pages in both directions, each with the head of its
 * arguments; one approval with all of them; the stamp the portal's live check compares; and the Approvals
 * region rendered from them, bounded however many are pending.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option, TestClock } from "effect"
import type { Caller } from "../../src/domain/Auth.js"
import { SophiaTest } from "../../src/layers/App.js"
import { Dispatcher } from "../../src/mcp/Dispatch.js"
import type { Frame } from "../../src/mcp/portal/Pages.js"
import { approvalCursorParam } from "../../src/mcp/portal/Pages.js"
import { makeRegions } from "../../src/mcp/portal/Regions.js"
import type { ApprovalCursor, PendingPage } from "../../src/services/approvals/OwnerView.js"
import { ARGS_HEAD_CHARS, PENDING_PAGE } from "../../src/services/approvals/OwnerView.js"
import { Approvals, PENDING_APPROVALS_SETTING } from "../../src/services/Approvals.js"
import { Portal } from "../../src/services/Portal.js"
import { connect } from "./Fixtures.js"

/** The app with the per-connection cap on pending approvals raised (one assistant asks for hundreds here). */
export const ManyPending = SophiaTest.pipe(
  Layer.provide(Layer.setConfigProvider(
    ConfigProvider.fromMap(new Map([[PENDING_APPROVALS_SETTING, "10000"]])).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))
  ))
)

/** A gated write of `caller` refused for the owner: its approval id. */
export const ask = (caller: Caller, title: string, body = "short") =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.add_document", { title, body })).pipe(
    Effect.map((o) => {
      assert.isFalse(o.ok)
      assert.strictEqual((o.body.error as any).code, "approval_required", JSON.stringify(o.body))
      return (o.body.error as any).approval_id as string
    })
  )

/** Every page from the newest to the oldest (following `older`), then back up to the newest (following `newer`). */
const walk = Effect.gen(function*() {
  const approvals = yield* Approvals
  const down: Array<PendingPage> = [yield* approvals.pendingPage()]
  while (down[down.length - 1].older !== null) down.push(yield* approvals.pendingPage({ before: down[down.length - 1].older! }))
  const up: Array<PendingPage> = [down[down.length - 1]]
  for (let newer = up[0].newer; newer !== null && newer !== "newest"; newer = up[up.length - 1].newer) {
    up.push(yield* approvals.pendingPage({ after: newer as ApprovalCursor }))
  }
  return { down, up }
})

export const approvalPagesSuite = () =>
  describe("the owner's view of approvals", () => {
    it.effect("pending approvals a page at a time, newest first, each once across the pages both ways (equal times too)", () =>
      Effect.gen(function*() {
        const { caller } = yield* connect("eager", "assistant")
        const asked: Array<string> = []
        // 90 a millisecond apart, then 30 asked at the same instant (ordered by id among themselves)
        for (let i = 0; i < 90; i++) {
          asked.push(yield* ask(caller, `doc ${i}`))
          yield* TestClock.adjust("1 millis")
        }
        for (let i = 90; i < 120; i++) asked.push(yield* ask(caller, `doc ${i}`))
        const { down, up } = yield* walk
        assert.deepStrictEqual(down.map((p) => p.items.length), [PENDING_PAGE, PENDING_PAGE, 20])
        assert.isTrue(down.every((p) => p.total === 120))
        assert.strictEqual(yield* (yield* Approvals).pendingCount(), 120)
        const listed = down.flatMap((p) => p.items.map((a) => a.approval_id))
        const newestFirst = [...asked.slice(90).sort().reverse(), ...asked.slice(0, 90).reverse()]
        assert.deepStrictEqual(listed, newestFirst)
        assert.strictEqual(down[0].newer, null)
        assert.isNotNull(down[1].newer)
        // back up: the same pages, the newest one reached again as itself
        assert.deepStrictEqual(up.map((p) => p.items.map((a) => a.approval_id)), [...down].reverse().map((p) => p.items.map((a) => a.approval_id)))
        assert.strictEqual(up[up.length - 1].newer, null)
        const first = down[0].items[0]
        assert.strictEqual(first.connection_name, "eager")
        assert.strictEqual(first.tool, "sophia.add_document")
        assert.isTrue(first.args_whole)
        assert.deepStrictEqual(JSON.parse(first.args_head), { title: `doc ${asked.indexOf(first.approval_id)}`, body: "short" })
      }).pipe(Effect.provide(ManyPending)))

    it.effect("a long argument is listed by its head and length; read whole one approval at a time", () =>
      Effect.gen(function*() {
        const approvals = yield* Approvals
        const { caller } = yield* connect("verbose", "assistant")
        const body = "é".repeat(3 * ARGS_HEAD_CHARS)
        const id = yield* ask(caller, "long", body)
        const [listed] = (yield* approvals.pendingPage()).items
        assert.strictEqual(listed.approval_id, id)
        assert.isFalse(listed.args_whole)
        assert.strictEqual([...listed.args_head].length, ARGS_HEAD_CHARS)
        assert.strictEqual(listed.args_chars, JSON.stringify({ title: "long", body }).length)
        const whole = Option.getOrThrow(yield* approvals.approvalInFull(id))
        assert.deepStrictEqual(whole.args, { title: "long", body })
        assert.isTrue(Option.isNone(yield* approvals.approvalInFull("apr-none")))
      }).pipe(Effect.provide(ManyPending)))

    it.effect("the stamp moves when an approval is asked, decided or executed, and only then", () =>
      Effect.gen(function*() {
        const approvals = yield* Approvals
        const { caller } = yield* connect("scribe", "assistant")
        const s0 = yield* approvals.stamp()
        const id = yield* ask(caller, "t")
        const s1 = yield* approvals.stamp()
        assert.notStrictEqual(s1, s0)
        yield* approvals.pendingPage()
        assert.strictEqual(yield* approvals.stamp(), s1)
        yield* approvals.decide(id, "approved")
        const s2 = yield* approvals.stamp()
        assert.notStrictEqual(s2, s1)
        const ran = yield* Effect.flatMap(Dispatcher, (d) => d.call(caller, "sophia.add_document", { title: "t", body: "short", approval_id: id }))
        assert.isTrue(ran.ok, JSON.stringify(ran.body))
        const s3 = yield* approvals.stamp()
        assert.notStrictEqual(s3, s2)
        // asked and decided between two reads: still a change
        yield* approvals.decide(yield* ask(caller, "u"), "denied")
        assert.notStrictEqual(yield* approvals.stamp(), s3)
      }).pipe(Effect.provide(SophiaTest)))

    it.effect("the Approvals region holds one page whatever is pending; older and newer pages are links; one approval in full", () =>
      Effect.gen(function*() {
        const { regionOf } = yield* makeRegions
        const caller = yield* (yield* Portal).callerFor()
        const frame: Frame = { csrf: "csrf", page: "Approvals" }
        const render = (query: Record<string, string> = {}) =>
          Effect.map(Effect.either(regionOf("/portal/approvals", { frame, caller, query: new URLSearchParams(query) })), (r) => {
            assert.strictEqual(r._tag, "Right")
            return r._tag === "Right" ? r.right.text : ""
          })
        const { caller: eager } = yield* connect("eager", "assistant")
        const long = yield* ask(eager, "long", "x".repeat(10_000))
        yield* TestClock.adjust("1 millis")
        for (let i = 0; i < 60; i++) yield* ask(eager, `doc ${i}`, "y".repeat(1_000))
        const first = yield* render()
        assert.include(first, "Pending (61)")
        assert.strictEqual(first.match(/data-approval="/g)?.length, PENDING_PAGE)
        assert.notInclude(first, long)
        const older = /href="\/portal\/approvals\?before=([^"]+)" rel="next">Older approvals/.exec(first)
        assert.isNotNull(older)
        const second = yield* render({ before: decodeURIComponent(older![1]) })
        assert.strictEqual(second.match(/data-approval="/g)?.length, 11)
        assert.include(second, `data-approval="${long}"`)
        assert.include(second, ">Newer approvals</a>")
        // the long one: its head, no Approve before its whole arguments are read, Deny at hand
        const card = second.slice(second.indexOf(`data-approval="${long}"`))
        assert.include(card, `href="/portal/approvals?approval=${long}"`)
        assert.include(card, `Read all ${JSON.stringify({ title: "long", body: "x".repeat(10_000) }).length} characters of the arguments`)
        assert.notInclude(card.slice(0, card.indexOf("</article>")), ">Approve</button>")
        assert.include(card.slice(0, card.indexOf("</article>")), ">Deny</button>")
        const whole = yield* render({ approval: long })
        assert.include(whole, "x".repeat(10_000))
        assert.include(whole, ">Approve</button>")
        assert.include(yield* render({ approval: "apr-nothing" }), "No approval apr-nothing")
        // a cursor that is no cursor is the first page
        assert.strictEqual((yield* render({ before: "nonsense" })).match(/data-approval="/g)?.length, PENDING_PAGE)
        assert.strictEqual(approvalCursorParam({ created_at: "2026-01-01T00:00:00.000Z", approval_id: "apr-x" }), "2026-01-01T00:00:00.000Z~apr-x")
      }).pipe(Effect.provide(ManyPending)))
  })
