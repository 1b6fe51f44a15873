import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { decideAccess } from "../src/domain/Access.js"
import { ACCESS_CLASSES } from "../src/domain/Auth.js"
import { SophiaTest } from "../src/layers/App.js"
import { Auth } from "../src/services/Auth.js"
import { connect } from "./support/Fixtures.js"

describe("Auth", () => {
  it.effect("mints a bearer of at least 32 random bytes, stored only as a hash", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const minted = yield* auth.createConnection({ name: "worker", profile: "full" })
      assert.match(minted.bearer, /^sph_[A-Za-z0-9_-]{43,}$/)
      assert.isAtLeast(Buffer.from(minted.bearer.slice(4), "base64url").length, 32)
      const { SqlClient } = yield* Effect.promise(() => import("@effect/sql"))
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ token_hash: string }>`SELECT token_hash FROM connections WHERE id = ${minted.connection_id}`
      assert.strictEqual(rows.length, 1)
      assert.notInclude(JSON.stringify(rows), minted.bearer)
      assert.match(rows[0].token_hash, /^[0-9a-f]{64}$/)
      const all = yield* sql`SELECT * FROM connections`
      assert.notInclude(JSON.stringify(all), minted.bearer.slice(4))
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("authenticates live bearers and refuses missing, malformed, unknown and revoked ones", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { bearer, caller } = yield* connect("worker", "assistant")
      assert.strictEqual(caller.profile, "assistant")
      assert.strictEqual(caller.connectionShort, caller.connectionId.slice(0, 8))
      for (const bad of [undefined, "", "garbage", "sph_" + "A".repeat(43), bearer + "x"]) {
        const err = yield* Effect.flip(auth.authenticate(bad))
        assert.strictEqual(err._tag, "Unauthenticated")
      }
      yield* auth.revoke("worker")
      const err = yield* Effect.flip(auth.authenticate(bearer))
      assert.strictEqual(err._tag, "Unauthenticated")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("every request sees the row as it is now: a rename, a changed scope or profile reaches the next Caller", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { bearer, caller } = yield* connect("worker", "full")
      // the same row twice: the same Caller
      assert.deepStrictEqual(yield* auth.authenticate(bearer), caller)
      yield* auth.rename("worker", "builder")
      assert.strictEqual((yield* auth.authenticate(bearer)).name, "builder")
      const { SqlClient } = yield* Effect.promise(() => import("@effect/sql"))
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE connections SET entity_scope = ${JSON.stringify(["e1"])}, profile = 'observer' WHERE id = ${caller.connectionId}`
      const changed = yield* auth.authenticate(bearer)
      assert.deepStrictEqual(changed.entityScope, ["e1"])
      assert.strictEqual(changed.profile, "observer")
      yield* auth.revoke(caller.connectionId)
      assert.strictEqual((yield* Effect.flip(auth.authenticate(bearer)))._tag, "Unauthenticated")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("connections(ids) reads the rows as they are now, however often asked: a rename, a revocation, another writer's change", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: a } = yield* connect("alpha")
      const { caller: b } = yield* connect("beta")
      const ids = [a.connectionId, b.connectionId]
      const first = yield* auth.connections(ids)
      assert.deepStrictEqual([first.get(a.connectionId)?.name, first.get(b.connectionId)?.name], ["alpha", "beta"])
      // the same rows again: the same answer
      assert.deepStrictEqual(yield* auth.connections(ids), first)
      yield* auth.rename("alpha", "gamma")
      yield* auth.revoke("beta")
      const second = yield* auth.connections(ids)
      assert.strictEqual(second.get(a.connectionId)?.name, "gamma")
      assert.isString(second.get(b.connectionId)?.revoked_at)
      // a change this service did not make (another process on the same store)
      const { SqlClient } = yield* Effect.promise(() => import("@effect/sql"))
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE connections SET name = 'delta', entity_scope = ${JSON.stringify(["e9"])} WHERE id = ${a.connectionId}`
      const third = yield* auth.connections([a.connectionId])
      assert.strictEqual(third.get(a.connectionId)?.name, "delta")
      assert.deepStrictEqual(third.get(a.connectionId)?.entity_scope, ["e9"])
      // any number of ids, in one statement each time (past the fixed statements' page size too)
      const many = yield* auth.connections([...Array.from({ length: 70 }, (_, i) => `none-${i}`), a.connectionId])
      assert.deepStrictEqual([...many.keys()], [a.connectionId])
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("names(ids) gives each connection's name as it is now, revoked ones too, in one statement however many ids", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: a } = yield* connect("alpha")
      const { caller: b } = yield* connect("beta")
      const ids = [a.connectionId, b.connectionId, a.connectionId, "no-such-connection"]
      assert.deepStrictEqual([...(yield* auth.names(ids))].sort(), [[a.connectionId, "alpha"], [b.connectionId, "beta"]].sort())
      yield* auth.rename("alpha", "gamma")
      yield* auth.revoke("beta")
      // a change this service did not make (another process on the same store)
      const { SqlClient } = yield* Effect.promise(() => import("@effect/sql"))
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE connections SET name = 'delta' WHERE id = ${b.connectionId}`
      const after = yield* auth.names(ids)
      assert.deepStrictEqual([after.get(a.connectionId), after.get(b.connectionId), after.size], ["gamma", "delta", 2])
      // the same answer as the full rows give
      const full = yield* auth.connections(ids)
      assert.deepStrictEqual([...after].sort(), [...full].map(([id, c]) => [id, c.name] as [string, string]).sort())
      // past the fixed statements' page size too, and none at all
      const many = yield* auth.names([...Array.from({ length: 70 }, (_, i) => `none-${i}`), a.connectionId])
      assert.deepStrictEqual([...many], [[a.connectionId, "gamma"]])
      assert.strictEqual((yield* auth.names([])).size, 0)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("names are unique per user among live connections; rename and revoke by id, short id or name", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const a = yield* auth.createConnection({ name: "alpha", profile: "full" })
      const dup = yield* Effect.flip(auth.createConnection({ name: "alpha", profile: "observer" }))
      assert.strictEqual(dup._tag, "ValidationError")
      // another user may use the same name
      yield* auth.createConnection({ name: "alpha", profile: "full", user: "bob" })
      const renamed = yield* auth.rename(a.connection_id.slice(0, 8), "beta")
      assert.strictEqual(renamed.name, "beta")
      assert.strictEqual(renamed.connection_id, a.connection_id)
      const revoked = yield* auth.revoke(a.connection_id)
      assert.isNotNull(revoked.revoked_at)
      // a revoked connection frees its name
      yield* auth.createConnection({ name: "beta", profile: "full" })
      const missing = yield* Effect.flip(auth.rename("nobody", "x"))
      assert.strictEqual(missing._tag, "NotFound")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("resolves selectors only among the caller's own user's live connections", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const { caller: alice } = yield* connect("alice", "full", "owner")
      const { caller: bobsAgent } = yield* connect("bobs-agent", "full", "bob")
      const byName = yield* auth.resolve(alice.userId, "alice")
      assert.strictEqual(byName.connection_id, alice.connectionId)
      const byShort = yield* auth.resolve(alice.userId, alice.connectionShort)
      assert.strictEqual(byShort.connection_id, alice.connectionId)
      const other = yield* Effect.flip(auth.resolve(alice.userId, bobsAgent.connectionId))
      assert.strictEqual(other._tag, "UnknownRecipient")
      const otherName = yield* Effect.flip(auth.resolve(alice.userId, "bobs-agent"))
      assert.strictEqual(otherName._tag, "UnknownRecipient")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("bootstraps the owner once, on an empty database", () =>
    Effect.gen(function*() {
      const auth = yield* Auth
      const first = yield* auth.bootstrapOwner()
      assert.isTrue(Option.isSome(first))
      const second = yield* auth.bootstrapOwner()
      assert.isTrue(Option.isNone(second))
      const caller = yield* auth.authenticate(Option.getOrThrow(first).bearer)
      assert.strictEqual(caller.profile, "full")
    }).pipe(Effect.provide(SophiaTest)))
})

describe("access rules (docs/architecture.md: Profiles and access)", () => {
  it("matches the table for every profile and access class", () => {
    const expected = {
      observer: ["allow", "forbidden", "forbidden", "forbidden"],
      assistant: ["allow", "allow", "approval", "owner_approval"],
      full: ["allow", "allow", "allow", "owner_approval"],
      portal: ["allow", "allow", "allow", "allow"]
    } as const
    for (const [profile, decisions] of Object.entries(expected)) {
      ACCESS_CLASSES.forEach((access, i) => {
        assert.strictEqual(decideAccess(profile as keyof typeof expected, access), decisions[i], `${profile}/${access}`)
      })
    }
  })
})
