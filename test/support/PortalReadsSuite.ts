/**
 * What the portal's pages read and say, on whichever store the suite runs (test/PortalReads.test.ts on
 * SQLite, test/postgres/PortalReads.test.ts on Postgres): the Knowledge listing without a search (newest
 * first, paged exactly, scoped), the Channels page opening on the most recent conversation, the Waits
 * page saying each predicate in words with short ids. Regions are rendered as the routes render them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { Caller } from "../../src/domain/Auth.js"
import { SophiaTest } from "../../src/layers/App.js"
import { Dispatcher } from "../../src/mcp/Dispatch.js"
import type { Frame } from "../../src/mcp/portal/Pages.js"
import { makeRegions } from "../../src/mcp/portal/Regions.js"
import { Knowledge } from "../../src/services/Knowledge.js"
import type { DocumentCursor } from "../../src/services/knowledge/DocumentList.js"
import { Portal } from "../../src/services/Portal.js"
import { connect } from "./Fixtures.js"

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i

const call = (caller: Caller, tool: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, tool, args)).pipe(
    Effect.tap((o) => Effect.sync(() => assert.isTrue(o.ok, `${tool}: ${JSON.stringify(o.body)}`))),
    Effect.map((o) => o.body as any)
  )

/** The live region of a portal page, as the portal's connection renders it, as plain text and as HTML. */
const region = (path: string, query: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const { regionOf } = yield* makeRegions
    const caller = yield* (yield* Portal).callerFor()
    const frame: Frame = { csrf: "csrf", page: "Fleet" }
    const html = (yield* Effect.either(regionOf(path, { frame, caller, query: new URLSearchParams(query) })))
    assert.strictEqual(html._tag, "Right", JSON.stringify(html))
    const text = html._tag === "Right" ? html.right.text : ""
    return { html: text, text: text.replace(/<[^>]+>/g, "").replace(/&quot;/g, "\"").replace(/&amp;/g, "&") }
  })

/** The HTML outside every `<details>` (what is shown unfolded). */
const unfolded = (html: string) => html.replace(/<details>[\s\S]*?<\/details>/g, "")

export const portalReadsSuite = () => {
  describe("Knowledge: the documents listed without a search", () => {
    it.effect("newest first, paged below a cursor without loss or repeat (ties on created_at included); reverted ones gone", () =>
      Effect.gen(function*() {
        const knowledge = yield* Knowledge
        const { caller } = yield* connect("writer")
        // seven documents of one import share one created_at; three more follow, a second apart
        const batch = yield* knowledge.importDocuments(caller, {
          documents: Array.from({ length: 7 }, (_, i) => ({ title: `batch ${i}`, body: `body ${i}` }))
        })
        const later: Array<string> = []
        for (const i of [1, 2, 3]) {
          yield* TestClock.adjust("1 second")
          later.push((yield* knowledge.addDocument(caller, { title: `later ${i}`, body: "x".repeat(300 * i) })).document_id)
        }
        yield* TestClock.adjust("1 second")
        const gone = yield* knowledge.addDocument(caller, { title: "reverted", body: "soon gone" })
        yield* knowledge.revert(caller, gone.mutation_id)

        const seen: Array<string> = []
        let cursor: DocumentCursor | undefined
        let pages = 0
        do {
          const page = yield* knowledge.recentDocuments(caller, 4, cursor)
          assert.isAtMost(page.items.length, 4)
          seen.push(...page.items.map((d) => d.document_id))
          cursor = page.next ?? undefined
          pages++
        } while (cursor !== undefined && pages < 10)
        assert.strictEqual(pages, 3)
        assert.strictEqual(new Set(seen).size, 10, "no document twice")
        assert.deepStrictEqual(seen.slice(0, 3), [...later].reverse())
        assert.sameMembers(seen.slice(3), batch.document_ids as Array<string>)
        assert.notInclude(seen, gone.document_id)

        const first = yield* knowledge.recentDocuments(caller, 1)
        assert.strictEqual(first.items[0].title, "later 3")
        assert.strictEqual(first.items[0].body_chars, 900)
        assert.strictEqual(first.items[0].excerpt.length, 240)
        // a page as long as what is left says there is no next one
        assert.isNull((yield* knowledge.recentDocuments(caller, 10)).next)
      }).pipe(Effect.provide(SophiaTest)))

    it.effect("within the caller's entity scope, and only its user's documents", () =>
      Effect.gen(function*() {
        const knowledge = yield* Knowledge
        const { caller: owner } = yield* connect("owner-agent")
        const alpha = yield* knowledge.createEntity(owner, { name: "alpha", kind: "project" })
        yield* knowledge.addDocument(owner, { title: "of alpha", body: "a", entity: alpha.entity_id })
        yield* knowledge.addDocument(owner, { title: "of nobody", body: "b" })
        const { caller: stranger } = yield* connect("stranger", "full", "someone-else")
        yield* knowledge.addDocument(stranger, { title: "the stranger's", body: "c" })
        const { caller: scoped } = yield* connect("scoped", "full", undefined, [alpha.entity_id])
        const { caller: nowhere } = yield* connect("nowhere", "full", undefined, ["ent-missing"])
        const titles = (c: Caller) => Effect.map(knowledge.recentDocuments(c, 50), (p) => p.items.map((d) => d.title).sort())
        assert.deepStrictEqual(yield* titles(owner), ["of alpha", "of nobody"])
        assert.deepStrictEqual(yield* titles(scoped), ["of alpha"])
        assert.deepStrictEqual(yield* titles(nowhere), [])
        assert.deepStrictEqual(yield* titles(stranger), ["the stranger's"])
      }).pipe(Effect.provide(SophiaTest)))

    it.effect("the Knowledge page lists them with no query, with a link to the older ones; a search still lists its hits", () =>
      Effect.gen(function*() {
        const knowledge = yield* Knowledge
        const portal = yield* (yield* Portal).callerFor()
        const empty = yield* region("/portal/knowledge")
        assert.include(empty.text, "Documents (0), newest first")
        assert.include(empty.text, "No documents yet.")
        for (let i = 0; i < 55; i++) {
          yield* TestClock.adjust("1 second")
          yield* knowledge.addDocument(portal, { title: `note ${String(i).padStart(2, "0")}`, body: `about portal ${i}` })
        }
        const first = yield* region("/portal/knowledge")
        assert.include(first.text, "Documents (55), newest first")
        assert.include(first.text, "note 54")
        assert.include(first.text, "note 05")
        assert.notInclude(first.text, "note 04")
        const older = /href="\/portal\/knowledge\?before=([^"]+)" rel="next">Older documents/.exec(first.html)
        assert.isNotNull(older)
        const second = yield* region("/portal/knowledge", { before: decodeURIComponent(older![1]) })
        assert.include(second.text, "note 04")
        assert.include(second.text, "note 00")
        assert.notInclude(second.text, "note 05")
        assert.include(second.text, "Newest documents")
        assert.notInclude(second.html, "rel=\"next\"")
        const found = yield* region("/portal/knowledge", { q: "portal" })
        assert.include(found.text, "Documents matching “portal”")
      }).pipe(Effect.provide(SophiaTest)))
  })

  describe("Channels: the page opens on a conversation", () => {
    it.effect("the most recently active conversation (heartbeats and wait posts aside) with its posts; counts said with their plural", () =>
      Effect.gen(function*() {
        const { caller: a } = yield* connect("builder")
        const empty = yield* region("/portal/channels")
        assert.include(empty.text, "No posts yet")
        yield* call(a, "sophia.coordination_post", { channel: "general", kind: "status", body: "hello all" })
        yield* TestClock.adjust("1 second")
        yield* call(a, "sophia.coordination_post", { channel: "arc:build-42", kind: "status", body: "building" })
        yield* TestClock.adjust("1 second")
        yield* call(a, "sophia.coordination_post", { channel: "arc:build-42", kind: "decision", body: "built" })
        yield* TestClock.adjust("1 second")
        yield* call(a, "sophia.beacon", { status: "alive" })
        const { caller: b } = yield* connect("waiter")
        yield* call(b, "sophia.declare_wait", { on: "builder", predicate: { type: "seq_reached", channel: "general", seq: 5 }, reason: "r" })
        const opened = yield* region("/portal/channels")
        assert.include(opened.text, "arc:build-42 (most recent activity)")
        assert.include(opened.text, "building")
        assert.include(opened.text, "built")
        assert.match(opened.text, /general\s+1 post\b/)
        assert.match(opened.text, /arc:build-42\s+2 posts/)
        assert.notMatch(opened.text, /\b1 posts\b/)
        assert.include(opened.html, "href=\"/portal/channels?channel=arc%3Abuild-42\" aria-current=\"true\"")
        // a channel asked for is shown, without the "most recent" note
        const asked = yield* region("/portal/channels", { channel: "general" })
        assert.include(asked.text, "hello all")
        assert.notInclude(asked.text, "most recent activity")
        assert.notInclude(asked.text, "building")
      }).pipe(Effect.provide(SophiaTest)))
  })

  describe("Waits: each predicate in words", () => {
    it.effect("names and 8-char ids in the words; the full ids only inside the folded exact JSON", () =>
      Effect.gen(function*() {
        const { caller: builder } = yield* connect("builder")
        const { caller: reviewer } = yield* connect("reviewer")
        const { caller: lead } = yield* connect("lead")
        yield* call(reviewer, "sophia.coordination_post", { channel: "arc:build-42", kind: "status", body: "one" })
        const posted = yield* call(builder, "sophia.declare_wait", {
          on: "reviewer",
          predicate: { type: "post_exists", channel: "arc:build-42", kind: "closeout" },
          reason: "needs the review closed out"
        })
        yield* call(lead, "sophia.declare_wait", {
          on: "builder",
          predicate: { type: "seq_reached", channel: "arc:build-42", seq: 40 },
          reason: "the build's 40th post"
        })
        const { caller: other } = yield* connect("other")
        yield* call(other, "sophia.declare_wait", {
          on: "lead",
          predicate: { type: "post_exists", channel: "general", from: "reviewer" },
          reason: "the reviewer's word"
        })
        const { html, text } = yield* region("/portal/waits")
        const short = (c: Caller) => c.connectionId.slice(0, 8)
        assert.include(text, `a closeout post in arc:build-42 from reviewer ${short(reviewer)} after #1`)
        assert.include(text, "arc:build-42 reaches #40")
        assert.include(text, `a post in general from reviewer ${short(reviewer)}`)
        assert.include(text, "Wait graph (3 open waits)")
        const waitId: string = posted.wait_id
        assert.include(text, waitId.replace(/^wait-/, "").slice(0, 8))
        // the exact form is kept, folded
        assert.include(html, "<details><summary>exact JSON</summary>")
        assert.include(text, `"from": "${reviewer.connectionId}"`)
        assert.include(text, waitId)
        assert.notMatch(unfolded(html), UUID)
        assert.notMatch(unfolded(html), /data-connection|"type":"post_exists"/)
      }).pipe(Effect.provide(SophiaTest)))
  })
}
