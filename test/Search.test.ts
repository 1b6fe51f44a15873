import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { fuseIds, RRF_K, SEARCH_ITEM_COMPACT } from "../src/domain/Search.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Knowledge } from "../src/services/Knowledge.js"
import { connect } from "./support/Fixtures.js"

const call = (caller: Caller, name: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))
const ok = (caller: Caller, name: string, args: unknown) =>
  Effect.map(call(caller, name, args), (body) => {
    assert.isUndefined(body.error, `${name} refused: ${JSON.stringify(body.error)}`)
    return body
  })

/** A small graph: two entities, documents and facts in each, and posts about the same words. */
const seed = Effect.gen(function*() {
  const knowledge = yield* Knowledge
  const { caller: owner } = yield* connect("owner-agent", "full")
  const alpha = yield* knowledge.createEntity(owner, { name: "alpha", kind: "project" })
  const beta = yield* knowledge.createEntity(owner, { name: "beta", kind: "project" })
  const docA = (yield* ok(owner, "sophia.add_document", { title: "alpha storage", body: "storage engine notes", entity: alpha.entity_id })).document_id
  const docB = (yield* ok(owner, "sophia.add_document", { title: "beta storage", body: "storage engine notes", entity: "beta" })).document_id
  yield* ok(owner, "sophia.submit_claim_graph", {
    claims: [{ subject: "storage", predicate: "engine", object: "sqlite", source_ids: [docA] }]
  })
  yield* ok(owner, "sophia.submit_claim_graph", {
    claims: [{ subject: "storage", predicate: "engine", object: "postgres", source_ids: [docB] }]
  })
  const post = yield* ok(owner, "sophia.coordination_post", { channel: "general", kind: "claim", body: "the storage engine is sqlite" })
  return { owner, alpha, beta, docA, docB, post }
})

describe("sophia.search", () => {
  it("RRF: 1/(k + rank) per list, best first; ties keep the list order; an id in two lists sums and ranks first", () => {
    const list = (kind: "documents" | "facts" | "posts", signal: "bm25" | "dense", ...ids: Array<string>) =>
      ({ kind, signal, ids: ids.map((id, i) => ({ id, ref: i + 100 })) }) as const
    const fused = fuseIds([list("documents", "bm25", "d1", "d2"), list("facts", "bm25", "f1"), list("posts", "bm25", "p1")], 60, 10)
    assert.deepStrictEqual(fused.map((i) => i.id), ["d1", "f1", "p1", "d2"])
    assert.strictEqual(fused[0].score, 1 / 61)
    assert.strictEqual(fused[3].score, 1 / 62)
    assert.deepStrictEqual(fused.map((i) => i.rank), [1, 1, 1, 2])
    // an item found by BM25 and by dense retrieval sums both contributions, keeps its BM25 index row and both signals
    const twice = fuseIds([list("documents", "bm25", "x", "y"), list("documents", "dense", "y", "z")], 60, 10)
    assert.deepStrictEqual(twice.map((i) => i.id), ["y", "x", "z"])
    assert.strictEqual(twice[0].score, 1 / 62 + 1 / 61)
    assert.deepStrictEqual(twice[0].signals, ["bm25", "dense"])
    assert.strictEqual(twice[0].ref, 101)
    assert.strictEqual(twice[0].rank, 1)
    // found by dense alone: no index row
    assert.deepStrictEqual(twice[2].signals, ["dense"])
    assert.isUndefined(twice[2].ref)
  })

  it.effect("fuses documents, facts and posts in one ranked list, names the fusion, labels posts as non-grounding", () =>
    Effect.gen(function*() {
      const { owner, docA, docB, post } = yield* seed
      const res = yield* ok(owner, "sophia.search", { query: "storage engine" })
      assert.deepStrictEqual(res.fusion, { method: "rrf", k: RRF_K, signals: ["bm25"] })
      const kinds = new Set(res.items.map((i: any) => i.kind))
      assert.deepStrictEqual([...kinds].sort(), ["document", "fact", "post"])
      assert.strictEqual(res.total, 5)
      assert.lengthOf(res.items, 5)
      // each kind's best hit is fused ahead of any kind's second hit (rank 1 = 1/61 > 1/62)
      assert.deepStrictEqual(res.items.slice(0, 3).map((i: any) => i.rank), [1, 1, 1])
      assert.deepStrictEqual(res.items.slice(0, 3).map((i: any) => i.kind), ["document", "fact", "post"])
      for (const item of res.items) assert.strictEqual(item.score, 1 / (RRF_K + item.rank))
      assert.includeMembers(res.items.filter((i: any) => i.kind === "document").map((i: any) => i.id), [docA, docB])
      const postHit = res.items.find((i: any) => i.kind === "post")
      assert.strictEqual(postHit.id, post.post_id)
      assert.strictEqual(postHit.grounding, false)
      assert.strictEqual(postHit.channel, "general")
      assert.include(postHit.title, "post")
      for (const i of res.items.filter((i: any) => i.kind !== "post")) assert.strictEqual(i.grounding, true)
      // kinds narrows; limit cuts the fused list
      const onlyPosts = yield* ok(owner, "sophia.search", { query: "storage", kinds: ["posts"] })
      assert.deepStrictEqual(onlyPosts.items.map((i: any) => i.kind), ["post"])
      const two = yield* ok(owner, "sophia.search", { query: "storage", limit: 2 })
      assert.lengthOf(two.items, 2)
      // no match, no items
      assert.deepStrictEqual((yield* ok(owner, "sophia.search", { query: "nothingmatches" })).items, [])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("honours entity scope for documents and facts (posts are the user's, as in the inbox)", () =>
    Effect.gen(function*() {
      const { alpha, docA, post } = yield* seed
      const { caller: scoped } = yield* connect("scoped-a", "observer", undefined, [alpha.entity_id])
      const res = yield* ok(scoped, "sophia.search", { query: "storage engine" })
      assert.deepStrictEqual(res.items.filter((i: any) => i.kind === "document").map((i: any) => i.id), [docA])
      const facts = res.items.filter((i: any) => i.kind === "fact")
      assert.deepStrictEqual(facts.map((f: any) => f.title), ["storage engine sqlite"])
      assert.deepStrictEqual(facts.map((f: any) => f.entity_id), [alpha.entity_id])
      assert.deepStrictEqual(res.items.filter((i: any) => i.kind === "post").map((i: any) => i.id), [post.post_id])
      const { caller: none } = yield* connect("scoped-none", "observer", undefined, ["ent-missing"])
      const nothing = yield* ok(none, "sophia.search", { query: "storage", kinds: ["documents", "facts"] })
      assert.deepStrictEqual(nothing.items, [])
      // another user sees nothing of this one
      const { caller: stranger } = yield* connect("stranger", "full", "someone-else")
      assert.deepStrictEqual((yield* ok(stranger, "sophia.search", { query: "storage" })).items, [])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("deleted facts never crowd live ones out of a kind's list (the same on both stores)", () =>
    Effect.gen(function*() {
      const knowledge = yield* Knowledge
      const { caller } = yield* connect("zoologist", "full")
      const doc = (yield* ok(caller, "sophia.add_document", { title: "Zebra field notes", body: "zebras seen at dawn" })).document_id
      const live = yield* ok(caller, "sophia.submit_claim_graph", {
        claims: [
          { subject: "zebra", predicate: "is", object: "striped", source_ids: [doc] },
          { subject: "zebra", predicate: "grazes", object: "grass", source_ids: [doc] }
        ]
      })
      // six facts that match the word more often than the live ones (BM25 and ts_rank both rank them first), then reverted
      const stronger = yield* ok(caller, "sophia.submit_claim_graph", {
        claims: Array.from({ length: 6 }, (_, i) => ({ subject: "zebra zebra", predicate: `zebra ${i}`, object: "zebra", source_ids: [doc] }))
      })
      yield* knowledge.revert(caller, stronger.mutation_id)
      const hits = yield* knowledge.searchFacts(caller, "zebra", 2)
      assert.sameMembers(hits.map((h) => h.fact_id), [...live.fact_ids])
      const fused = yield* ok(caller, "sophia.search", { query: "zebra", kinds: ["facts"], limit: 2 })
      assert.sameMembers(fused.items.map((i: any) => i.id), [...live.fact_ids])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("compact is at most 6 keys; fields projects exactly; an unknown field is refused with valid_keys", () =>
    Effect.gen(function*() {
      const { owner } = yield* seed
      const compact = yield* ok(owner, "sophia.search", { query: "storage", compact: true })
      assert.isAtMost(SEARCH_ITEM_COMPACT.length, 6)
      for (const item of compact.items) {
        assert.isAtMost(Object.keys(item).length, 6)
        assert.includeMembers(Object.keys(item), ["kind", "id", "score"])
      }
      assert.strictEqual(compact.fusion.method, "rrf")
      const fields = yield* ok(owner, "sophia.search", { query: "storage", fields: ["kind", "id"] })
      for (const item of fields.items) assert.deepStrictEqual(Object.keys(item).sort(), ["id", "kind"])
      const bad = yield* call(owner, "sophia.search", { query: "storage", fields: ["kind", "nope"] })
      assert.strictEqual(bad.error.code, "unknown_fields")
      assert.deepStrictEqual(bad.error.unknown, ["nope"])
      assert.includeMembers(bad.error.valid_keys, ["kind", "id", "title", "snippet", "score", "grounding"])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("the catalog and get_sdk_types carry the wave-2 tools", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("reader", "observer")
      const catalog = yield* ok(caller, "sophia.capability_catalog", { brief: true })
      const names = JSON.stringify(catalog.groups)
      assert.include(names, "sophia.search")
      assert.include(names, "sophia.approval_status")
      const sdk = yield* ok(caller, "sophia.get_sdk_types", {})
      assert.include(sdk.declarations, "search(")
      assert.include(sdk.declarations, "approvalStatus(")
      assert.include(sdk.declarations, "wait_s")
      assert.include(sdk.declarations, "grounding")
    }).pipe(Effect.provide(SophiaTest)))
})
