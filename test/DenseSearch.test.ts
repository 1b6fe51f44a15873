import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { RRF_K } from "../src/domain/Search.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { MetricsScrape } from "../src/observability/Metrics.js"
import { Embeddings } from "../src/services/Embeddings.js"
import { Knowledge } from "../src/services/Knowledge.js"
import { startEmbeddingServer } from "./support/EmbeddingServer.js"
import type { EmbeddingServer, Mode } from "./support/EmbeddingServer.js"
import { connect } from "./support/Fixtures.js"

/**
 * Dense retrieval fused with BM25 (docs/architecture.md, "Dense retrieval"), over the real client against a
 * small embeddings server this suite starts (test/support/EmbeddingServer.ts: synonyms get close vectors),
 * on either store. Real time (`it.live`): the provider is a real HTTP server.
 */

const call = (caller: Caller, name: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))
const ok = (caller: Caller, name: string, args: unknown) =>
  Effect.map(call(caller, name, args), (body) => {
    assert.isUndefined(body.error, `${name} refused: ${JSON.stringify(body.error)}`)
    return body
  })

/** The app with `SOPHIA_EMBEDDINGS_*` set (the rest of the configuration from the environment: the test store). */
const appWith = (settings: Record<string, string>) =>
  SophiaTest.pipe(Layer.provide(Layer.setConfigProvider(
    ConfigProvider.fromMap(new Map(Object.entries(settings))).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv()))
  )))

const configFor = (url: string, timeoutMs = 2000) => ({
  SOPHIA_EMBEDDINGS_URL: url,
  SOPHIA_EMBEDDINGS_MODEL: "test-synonyms",
  SOPHIA_EMBEDDINGS_TIMEOUT_MS: String(timeoutMs)
})

/** The embeddings server started in `mode`, and the app configured to use it (a fresh store), for `body`. */
const onServer = <A, E>(
  mode: Mode,
  body: (server: EmbeddingServer) => Effect.Effect<A, E, Layer.Layer.Success<typeof SophiaTest>>,
  timeoutMs = 2000
) =>
  Effect.acquireUseRelease(
    Effect.promise(() => startEmbeddingServer({ mode })),
    (server) => Effect.provide(body(server), appWith(configFor(server.url, timeoutMs))),
    (server) => Effect.promise(() => server.close())
  )

/** Until the feed has embedded everything written so far (bounded generously: the machine is shared). */
const drained = (atLeast: number) =>
  Effect.gen(function*() {
    const embeddings = yield* Embeddings
    for (let i = 0; i < 300; i++) {
      const status = embeddings.status()
      if (status !== undefined && status.embedded >= atLeast && status.backlog === 0) return
      yield* Effect.sleep("50 millis")
    }
    assert.fail(`the feed did not embed ${atLeast} items in 15 s: ${JSON.stringify(embeddings.status())}`)
  })

/** Documents, facts and posts whose words differ from the queries below. */
const seed = Effect.gen(function*() {
  const knowledge = yield* Knowledge
  const { caller: owner } = yield* connect("owner-agent", "full")
  const alpha = yield* knowledge.createEntity(owner, { name: "alpha", kind: "project" })
  const beta = yield* knowledge.createEntity(owner, { name: "beta", kind: "project" })
  const carDoc = (yield* ok(owner, "sophia.add_document", { title: "car maintenance", body: "car maintenance schedule", entity: beta.entity_id }))
    .document_id
  const doctorDoc = (yield* ok(owner, "sophia.add_document", { title: "physician notes", body: "the physician on call", entity: alpha.entity_id }))
    .document_id
  const otherDoc = (yield* ok(owner, "sophia.add_document", { title: "garden", body: "tomatoes and beans", entity: alpha.entity_id }))
    .document_id
  const fact = (yield* ok(owner, "sophia.submit_claim_graph", {
    claims: [{ subject: "vehicle", predicate: "needs", object: "service", source_ids: [carDoc] }]
  })).fact_ids[0] as string
  const post = (yield* ok(owner, "sophia.coordination_post", { channel: "ops", kind: "status", body: "the auto is in for a fix" })).post_id as string
  yield* ok(owner, "sophia.coordination_post", { channel: "ops", kind: "status", body: "tomatoes are ripe" })
  return { owner, alpha, beta, carDoc, doctorDoc, otherDoc, fact, post }
})

describe("sophia.search with dense retrieval", () => {
  it.live("a query sharing no word with a document, a fact or a post finds each through dense; BM25 and dense fused", () =>
    onServer("ok", (server) =>
      Effect.gen(function*() {
        const { carDoc, fact, owner, post } = yield* seed
        yield* drained(6)
        // "automobile repair" shares no word with "car maintenance", "vehicle needs service", "the auto is in for a fix"
        const res = yield* ok(owner, "sophia.search", { query: "automobile repair" })
        assert.deepStrictEqual(res.fusion, { method: "rrf", k: RRF_K, signals: ["bm25", "dense"] })
        assert.isUndefined(res.degraded)
        const found = (kind: string, id: string) => res.items.find((i: any) => i.kind === kind && i.id === id)
        for (const [kind, id] of [["document", carDoc], ["fact", fact], ["post", post]] as const) {
          const item = found(kind, id)
          assert.isDefined(item, `${kind} ${id} not found through dense: ${JSON.stringify(res.items)}`)
          assert.deepStrictEqual(item.signals, ["dense"])
        }
        // unrelated rows are not dragged in (below the similarity floor)
        assert.isFalse(res.items.some((i: any) => /tomatoes|garden/.test(i.title + i.snippet)), JSON.stringify(res.items))
        // a dense-only hit's snippet is the start of its text
        assert.include(found("document", carDoc).snippet, "car maintenance")
        // a word both signals find: both contribute, and the item says so
        const both = yield* ok(owner, "sophia.search", { query: "car", kinds: ["documents"] })
        assert.strictEqual(both.items[0].id, carDoc)
        assert.deepStrictEqual(both.items[0].signals, ["bm25", "dense"])
        assert.strictEqual(both.items[0].score, 2 / (RRF_K + 1))
        assert.include(both.items[0].snippet, "[car]")
        assert.isAtLeast(server.stats.texts, 6)
      })), { timeout: 60_000 })

  it.live("entity scope holds for dense hits: a scoped connection never sees a hit outside its scope", () =>
    onServer("ok", () =>
      Effect.gen(function*() {
        const { alpha, carDoc, doctorDoc, fact, post } = yield* seed
        yield* drained(6)
        const { caller: scoped } = yield* connect("scoped-alpha", "observer", undefined, [alpha.entity_id])
        // the car document and its fact are in beta: nearest to the query, yet never shown to alpha's connection
        const res = yield* ok(scoped, "sophia.search", { query: "automobile repair" })
        assert.deepStrictEqual(res.fusion.signals, ["bm25", "dense"])
        const ids = res.items.map((i: any) => i.id)
        assert.notInclude(ids, carDoc)
        assert.notInclude(ids, fact)
        for (const i of res.items.filter((i: any) => i.kind !== "post")) assert.strictEqual(i.entity_id, alpha.entity_id)
        // not even ranked: every id found (BM25 or dense) is on the page, none dropped when the rows were read
        assert.strictEqual(res.total, res.items.length)
        // posts are the user's (as in the inbox): the scoped connection finds the post through dense
        assert.include(ids, post)
        // inside its scope, dense finds what words miss: "clinician" shares no word with "physician notes"
        const inScope = yield* ok(scoped, "sophia.search", { query: "clinician", kinds: ["documents"] })
        assert.deepStrictEqual(inScope.items.map((i: any) => i.id), [doctorDoc])
        assert.deepStrictEqual(inScope.items[0].signals, ["dense"])
        // a scope naming nothing sees nothing of documents and facts, dense or not
        const { caller: none } = yield* connect("scoped-none", "observer", undefined, ["ent-missing"])
        assert.deepStrictEqual((yield* ok(none, "sophia.search", { query: "automobile repair", kinds: ["documents", "facts"] })).items, [])
        // another user sees nothing of this one
        const { caller: stranger } = yield* connect("stranger", "full", "someone-else")
        assert.deepStrictEqual((yield* ok(stranger, "sophia.search", { query: "automobile repair" })).items, [])
      })), { timeout: 60_000 })

  it.live("a provider answering 500: search answers with BM25 alone and says degraded", () =>
    onServer("fail", () =>
      Effect.gen(function*() {
        const { carDoc, owner } = yield* seed
        const res = yield* ok(owner, "sophia.search", { query: "car" })
        assert.deepStrictEqual(res.fusion, { method: "rrf", k: RRF_K, signals: ["bm25"] })
        assert.include(res.degraded, "500")
        assert.include(res.items.map((i: any) => i.id), carDoc)
        for (const i of res.items) assert.deepStrictEqual(i.signals, ["bm25"])
        // a second search does not wait on the provider again for a while, and still answers
        const again = yield* ok(owner, "sophia.search", { query: "car maintenance" })
        assert.isString(again.degraded)
        assert.include(again.items.map((i: any) => i.id), carDoc)
      })), { timeout: 60_000 })

  it.live("a provider that hangs: search answers with BM25 within the timeout and says degraded", () =>
    onServer("hang", (server) =>
      Effect.gen(function*() {
        const { carDoc, owner } = yield* seed
        const started = Date.now()
        const res = yield* ok(owner, "sophia.search", { query: "car" })
        assert.isBelow(Date.now() - started, 10_000)
        assert.include(res.degraded, "no answer within")
        assert.deepStrictEqual(res.fusion.signals, ["bm25"])
        assert.include(res.items.map((i: any) => i.id), carDoc)
        assert.isAbove(server.stats.pending, 0)
      }), 300), { timeout: 60_000 })

  it.live("no provider at the configured address: search answers with BM25 and says degraded", () =>
    Effect.gen(function*() {
      // a port that was just free: nothing listens there
      const server = yield* Effect.promise(() => startEmbeddingServer())
      const url = server.url
      yield* Effect.promise(() => server.close())
      yield* Effect.gen(function*() {
        const { carDoc, owner } = yield* seed
        const res = yield* ok(owner, "sophia.search", { query: "car" })
        assert.isString(res.degraded)
        assert.deepStrictEqual(res.fusion.signals, ["bm25"])
        assert.include(res.items.map((i: any) => i.id), carDoc)
      }).pipe(Effect.provide(appWith(configFor(url))))
    }), { timeout: 60_000 })

  it.live("nothing is embedded on the write path: posts and documents commit while the provider hangs", () =>
    onServer("hang", (server) =>
      Effect.gen(function*() {
        const { caller: a } = yield* connect("writer", "full")
        const { caller: b } = yield* connect("reader", "full")
        yield* ok(a, "sophia.coordination_post", { channel: "ops", kind: "status", body: "first automobile note" })
        // the feed has asked the provider, which does not answer
        for (let i = 0; i < 200 && server.stats.pending === 0; i++) yield* Effect.sleep("25 millis")
        assert.isAbove(server.stats.pending, 0, "the feed never called the provider")
        const started = Date.now()
        const second = yield* ok(a, "sophia.coordination_post", { channel: "ops", kind: "status", body: "second automobile note" })
        const doc = yield* ok(a, "sophia.add_document", { title: "car maintenance", body: "written while the provider hangs" })
        // both committed at once (bounded generously; the provider would hang for a minute)
        assert.isBelow(Date.now() - started, 10_000)
        const inbox = yield* ok(b, "sophia.coordination_inbox", { channel: "ops", peek: true })
        assert.include(inbox.posts.map((p: any) => p.post_id), second.post_id)
        const found = yield* ok(b, "sophia.search", { query: "car", kinds: ["documents"] })
        assert.include(found.items.map((i: any) => i.id), doc.document_id)
        // and nothing was embedded: the backlog says what waits
        const embeddings = yield* Embeddings
        assert.strictEqual(embeddings.status()?.embedded, 0)
      })), { timeout: 60_000 })

  it.live("the backlog is visible: orient's counts and /metrics", () =>
    onServer("fail", () =>
      Effect.gen(function*() {
        const { owner } = yield* seed
        const embeddings = yield* Embeddings
        // the feed counts the backlog before asking the provider (which fails)
        for (let i = 0; i < 200 && (embeddings.status()?.backlog ?? 0) < 6; i++) yield* Effect.sleep("25 millis")
        const orient = yield* ok(owner, "sophia.orient", {})
        assert.isAtLeast(orient.counts.embedding_backlog, 6)
        const metrics = yield* Effect.flatMap(MetricsScrape, (m) => m.render())
        assert.match(metrics, /^sophia_embedding_backlog \d+$/m)
        assert.isAtLeast(Number(/^sophia_embedding_backlog (\d+)$/m.exec(metrics)![1]), 6)
      })), { timeout: 60_000 })

  it.effect("without SOPHIA_EMBEDDINGS_URL: BM25 alone, not degraded, no backlog shown", () =>
    Effect.gen(function*() {
      const { owner } = yield* seed
      const res = yield* ok(owner, "sophia.search", { query: "automobile repair" })
      assert.deepStrictEqual(res.fusion.signals, ["bm25"])
      assert.isUndefined(res.degraded)
      assert.deepStrictEqual(res.items, [])
      const orient = yield* ok(owner, "sophia.orient", {})
      assert.isUndefined(orient.counts.embedding_backlog)
      // the SDK types carry the result's new fields (generated from the same Schemas)
      const declarations = (yield* ok(owner, "sophia.get_sdk_types", {})).declarations as string
      assert.match(declarations, /degraded\?: string/)
      assert.match(declarations, /signals\?: ReadonlyArray<"bm25" \| "dense">|signals\?: \("bm25" \| "dense"\)\[\]|signals\?: Array<"bm25" \| "dense">/)
    }).pipe(Effect.provide(SophiaTest)))
})
