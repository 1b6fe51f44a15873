import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Caller } from "../src/domain/Auth.js"
import { POST_NOT_GROUNDING } from "../src/domain/Knowledge.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { Knowledge } from "../src/services/Knowledge.js"
import { connect } from "./support/Fixtures.js"

/** A tool call through the one dispatcher path; returns the body (refusals included). */
const call = (caller: Caller, name: string, args: unknown) =>
  Effect.flatMap(Dispatcher, (d) => d.call(caller, name, args)).pipe(Effect.map((o) => o.body as any))

const ok = (caller: Caller, name: string, args: unknown) =>
  Effect.map(call(caller, name, args), (body) => {
    assert.isUndefined(body.error, `${name} refused: ${JSON.stringify(body.error)}`)
    return body
  })

const count = (table: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)}`, (rows) => Number(rows[0].n))).pipe(Effect.orDie)

const addDoc = (caller: Caller, title: string, body: string, entity?: string) =>
  Effect.map(ok(caller, "sophia.add_document", { title, body, ...(entity ? { entity } : {}) }), (r) => r.document_id as string)

describe("Knowledge: grounding", () => {
  it.effect("a claim citing a post is refused with the exact message and nothing is written", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const docId = yield* addDoc(caller, "Runbook", "restart the service with systemctl")
      const post = yield* ok(caller, "sophia.coordination_post", { channel: "general", kind: "claim", body: "the restart works" })
      assert.match(post.post_id, /^post-/)
      const [facts, sources, journal] = [yield* count("facts"), yield* count("fact_sources"), yield* count("mutations")]
      for (
        const claims of [
          [{ subject: "service", predicate: "restart", object: "systemctl", source_ids: [post.post_id] }],
          // all or nothing: a valid claim beside the bad one is not written either
          [
            { subject: "service", predicate: "restart", object: "systemctl", source_ids: [docId] },
            { subject: "service", predicate: "status", object: "ok", source_ids: [docId, post.post_id] }
          ]
        ]
      ) {
        const body = yield* call(caller, "sophia.submit_claim_graph", { claims })
        assert.strictEqual(body.error.code, "invalid_grounding_source")
        assert.strictEqual(body.error.message, POST_NOT_GROUNDING)
        assert.strictEqual(
          body.error.message,
          "agent posts are not valid grounding sources — cite the primary source the post references."
        )
        assert.strictEqual(body.error.source_id, post.post_id)
      }
      assert.strictEqual(yield* count("facts"), facts)
      assert.strictEqual(yield* count("fact_sources"), sources)
      assert.strictEqual(yield* count("mutations"), journal)
      const facts2 = yield* ok(caller, "sophia.query_knowledge", { subject: "service" })
      assert.lengthOf(facts2.facts, 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a claim citing documents succeeds and the fact comes back with its sources", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const a = yield* addDoc(caller, "Design doc", "the cache is write-through")
      const b = yield* addDoc(caller, "Review notes", "confirmed: the cache is write-through")
      const res = yield* ok(caller, "sophia.submit_claim_graph", {
        claims: [{ subject: "cache", predicate: "policy", object: "write-through", source_ids: [a, b, a] }]
      })
      assert.lengthOf(res.fact_ids, 1)
      const { facts } = yield* ok(caller, "sophia.query_knowledge", { subject: "CACHE" })
      assert.lengthOf(facts, 1)
      assert.strictEqual(facts[0].fact_id, res.fact_ids[0])
      assert.strictEqual(facts[0].object, "write-through")
      assert.strictEqual(facts[0].origin, "claim")
      assert.sameMembers(facts[0].sources.map((s: any) => s.document_id), [a, b])
      const byText = yield* ok(caller, "sophia.query_knowledge", { text: "WRITE-thr" })
      assert.lengthOf(byText.facts, 1)
      const none = yield* ok(caller, "sophia.query_knowledge", { predicate: "owner" })
      assert.lengthOf(none.facts, 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a source that resolves to nothing (or to another user's document) is refused too", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const { caller: bob } = yield* connect("bobs", "full", "bob")
      const bobsDoc = yield* addDoc(bob, "Bob's", "private")
      for (const source of ["doc-nope", bobsDoc]) {
        const body = yield* call(caller, "sophia.submit_claim_graph", {
          claims: [{ subject: "x", predicate: "y", object: "z", source_ids: [source] }]
        })
        assert.strictEqual(body.error.code, "invalid_grounding_source")
        assert.strictEqual(body.error.resolved_as, "nothing")
        assert.notStrictEqual(body.error.message, POST_NOT_GROUNDING)
      }
      assert.strictEqual(yield* count("facts"), 0)
    }).pipe(Effect.provide(SophiaTest)))
})

describe("Knowledge: search", () => {
  it.effect("ranks the best match first (BM25), with snippets, limit and query syntax neutralised", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      yield* addDoc(caller, "Gardening", "tomatoes need sun and water; consensus among gardeners is mulch")
      const best = yield* addDoc(
        caller,
        "Raft consensus",
        "raft is a consensus algorithm; raft elects a leader and replicates a log for consensus"
      )
      const middle = yield* addDoc(caller, "Distributed systems notes", "paxos and raft both solve consensus")
      yield* addDoc(caller, "Cooking", "boil water, add pasta")
      const { items } = yield* ok(caller, "sophia.search_documents", { query: "raft consensus" })
      assert.lengthOf(items, 3)
      assert.strictEqual(items[0].document_id, best)
      assert.strictEqual(items[1].document_id, middle)
      assert.isTrue(items[0].score >= items[1].score && items[1].score >= items[2].score)
      assert.include(items[0].snippet, "[")
      const limited = yield* ok(caller, "sophia.search_documents", { query: "raft consensus", limit: 1 })
      assert.lengthOf(limited.items, 1)
      const weird = yield* ok(caller, "sophia.search_documents", { query: "\"raft\" AND (NEAR* -" })
      assert.strictEqual(weird.items[0].document_id, best)
      const nothing = yield* ok(caller, "sophia.search_documents", { query: "()*" })
      assert.lengthOf(nothing.items, 0)
      const compact = yield* ok(caller, "sophia.search_documents", { query: "raft", compact: true })
      assert.sameMembers(Object.keys(compact.items[0]), ["document_id", "title", "snippet", "score"])
      const fields = yield* ok(caller, "sophia.search_documents", { query: "raft", fields: ["title"] })
      assert.deepStrictEqual(Object.keys(fields.items[0]), ["title"])
      const unknown = yield* call(caller, "sophia.search_documents", { query: "raft", fields: ["nope"] })
      assert.strictEqual(unknown.error.code, "unknown_fields")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("never shows another user's documents", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("worker", "full")
      const { caller: bob } = yield* connect("bobs", "full", "bob")
      yield* addDoc(bob, "secret plan", "zanzibar")
      assert.lengthOf((yield* ok(caller, "sophia.search_documents", { query: "zanzibar" })).items, 0)
      assert.lengthOf((yield* ok(bob, "sophia.search_documents", { query: "zanzibar" })).items, 1)
    }).pipe(Effect.provide(SophiaTest)))
})

describe("Knowledge: entity scope", () => {
  it.effect("filters every read tool by the connection's entity_scope (ids or names; empty = all)", () =>
    Effect.gen(function*() {
      const knowledge = yield* Knowledge
      const { caller: owner } = yield* connect("owner-agent", "full")
      // entities are elevated through MCP; the service is the owner's direct path
      const alpha = yield* knowledge.createEntity(owner, { name: "alpha", kind: "project" })
      const beta = yield* knowledge.createEntity(owner, { name: "beta", kind: "project" })
      const docA = yield* addDoc(owner, "alpha design", "shared words about storage", alpha.entity_id)
      const docB = yield* addDoc(owner, "beta design", "shared words about storage", "beta")
      yield* addDoc(owner, "unscoped", "shared words about storage")
      yield* ok(owner, "sophia.submit_claim_graph", {
        claims: [{ subject: "storage", predicate: "engine", object: "sqlite", source_ids: [docA] }]
      })
      yield* ok(owner, "sophia.submit_claim_graph", {
        claims: [{ subject: "storage", predicate: "engine", object: "postgres", source_ids: [docB] }]
      })
      const { caller: scopedA } = yield* connect("scoped-a", "full", undefined, [alpha.entity_id])
      const { caller: scopedBByName } = yield* connect("scoped-b", "observer", undefined, ["beta"])
      const { caller: scopedNothing } = yield* connect("scoped-none", "full", undefined, ["ent-missing"])

      const search = (c: Caller) =>
        Effect.map(ok(c, "sophia.search_documents", { query: "storage" }), (r) => r.items.map((i: any) => i.document_id))
      const facts = (c: Caller) =>
        Effect.map(ok(c, "sophia.query_knowledge", { subject: "storage" }), (r) => r.facts.map((f: any) => f.object))

      assert.lengthOf(yield* search(owner), 3)
      assert.deepStrictEqual(yield* search(scopedA), [docA])
      assert.deepStrictEqual(yield* search(scopedBByName), [docB])
      assert.deepStrictEqual(yield* search(scopedNothing), [])
      assert.sameMembers(yield* facts(owner), ["sqlite", "postgres"])
      assert.deepStrictEqual(yield* facts(scopedA), ["sqlite"])
      assert.deepStrictEqual(yield* facts(scopedBByName), ["postgres"])
      assert.deepStrictEqual(yield* facts(scopedNothing), [])
      // a document outside the scope cannot ground a claim either
      const refused = yield* call(scopedA, "sophia.submit_claim_graph", {
        claims: [{ subject: "storage", predicate: "engine", object: "x", source_ids: [docB] }]
      })
      assert.strictEqual(refused.error.code, "invalid_grounding_source")
    }).pipe(Effect.provide(SophiaTest)))
})

describe("Knowledge: journal and revert", () => {
  it.effect("every write is journaled; revert writes the compensating change and is journaled itself", () =>
    Effect.gen(function*() {
      const knowledge = yield* Knowledge
      const { caller } = yield* connect("worker", "full")
      const added = yield* ok(caller, "sophia.add_document", { title: "Quasar notes", body: "quasars are bright" })
      const claim = yield* ok(caller, "sophia.submit_claim_graph", {
        claims: [{ subject: "quasar", predicate: "is", object: "bright", source_ids: [added.document_id] }]
      })
      const journal = yield* knowledge.mutations(caller)
      const docEntry = journal.find((m) => m.id === added.mutation_id)!
      assert.strictEqual(docEntry.tool, "sophia.add_document")
      assert.isNull(docEntry.changes[0].before)
      assert.strictEqual((docEntry.changes[0].after as any).title, "Quasar notes")
      assert.strictEqual(journal.find((m) => m.id === claim.mutation_id)!.changes[0].id, claim.fact_ids[0])

      // revert the claim: the fact disappears
      const r1 = yield* knowledge.revert(caller, claim.mutation_id)
      assert.lengthOf((yield* ok(caller, "sophia.query_knowledge", { subject: "quasar" })).facts, 0)
      // revert the document: it leaves search
      const r2 = yield* knowledge.revert(caller, added.mutation_id)
      assert.lengthOf((yield* ok(caller, "sophia.search_documents", { query: "quasars" })).items, 0)
      const after = yield* knowledge.mutations(caller)
      const revertEntry = after.find((m) => m.id === r2.mutation_id)!
      assert.strictEqual(revertEntry.tool, "sophia.revert_mutation")
      assert.strictEqual(revertEntry.reverts, added.mutation_id)
      assert.isNull(revertEntry.changes[0].after)
      assert.strictEqual((revertEntry.changes[0].before as any).title, "Quasar notes")
      assert.strictEqual(after.find((m) => m.id === added.mutation_id)!.reverted_by, r2.mutation_id)
      // a mutation is reverted once
      const twice = yield* Effect.flip(knowledge.revert(caller, added.mutation_id))
      assert.strictEqual(twice._tag, "ValidationError")
      // reverting the reverts restores both, exactly
      yield* knowledge.revert(caller, r2.mutation_id)
      yield* knowledge.revert(caller, r1.mutation_id)
      const found = yield* ok(caller, "sophia.search_documents", { query: "quasars" })
      assert.deepStrictEqual(found.items.map((i: any) => i.document_id), [added.document_id])
      const facts = (yield* ok(caller, "sophia.query_knowledge", { subject: "quasar" })).facts
      assert.deepStrictEqual(facts.map((f: any) => f.fact_id), claim.fact_ids)
      // and the original may be reverted again
      yield* knowledge.revert(caller, added.mutation_id)
      assert.lengthOf((yield* ok(caller, "sophia.search_documents", { query: "quasars" })).items, 0)
      const missing = yield* Effect.flip(knowledge.revert(caller, "mut-nope"))
      assert.strictEqual(missing._tag, "NotFound")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("an import session commits its documents as one and reverts as one; a bad batch writes nothing", () =>
    Effect.gen(function*() {
      const knowledge = yield* Knowledge
      const { caller } = yield* connect("worker", "full")
      const docs = Array.from({ length: 5 }, (_, i) => ({ title: `Import ${i}`, body: `imported lighthouse text ${i}` }))
      const bad = yield* Effect.flip(knowledge.importDocuments(caller, { documents: docs, entity: "no-such-entity" }))
      assert.strictEqual(bad._tag, "NotFound")
      assert.strictEqual(yield* count("documents"), 0)
      const session = yield* knowledge.importDocuments(caller, { documents: docs })
      assert.strictEqual(session.status, "committed")
      assert.lengthOf(session.document_ids, 5)
      assert.lengthOf((yield* ok(caller, "sophia.search_documents", { query: "lighthouse" })).items, 5)
      const r = yield* knowledge.revert(caller, session.mutation_id)
      assert.strictEqual(r.changes, 5)
      assert.lengthOf((yield* ok(caller, "sophia.search_documents", { query: "lighthouse" })).items, 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("remember_fact stores a fact without sources; create_entity refuses a duplicate name", () =>
    Effect.gen(function*() {
      const knowledge = yield* Knowledge
      const { caller } = yield* connect("worker", "full")
      const fact = yield* knowledge.rememberFact(caller, { subject: "owner", predicate: "prefers", object: "tabs" })
      const { facts } = yield* ok(caller, "sophia.query_knowledge", { subject: "owner" })
      assert.strictEqual(facts[0].fact_id, fact.fact_id)
      assert.strictEqual(facts[0].origin, "remembered")
      assert.lengthOf(facts[0].sources, 0)
      const compact = yield* ok(caller, "sophia.query_knowledge", { subject: "owner", compact: true })
      assert.sameMembers(Object.keys(compact.facts[0]), ["fact_id", "subject", "predicate", "object", "sources"])
      yield* knowledge.createEntity(caller, { name: "alpha", kind: "project" })
      const dup = yield* Effect.flip(knowledge.createEntity(caller, { name: "alpha", kind: "team" }))
      assert.strictEqual(dup._tag, "ValidationError")
    }).pipe(Effect.provide(SophiaTest)))
})
