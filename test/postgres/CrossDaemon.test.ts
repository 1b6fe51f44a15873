/**
 * Cross-daemon wake-ups: two app instances (each its own pool and LISTEN connection, as two daemons)
 * on one Postgres schema. A post, a revocation and a decided approval committed on one reach the other's
 * events service (`Events.listen`) through LISTEN/NOTIFY, and a wait declared on one resolves with a post
 * on the other. Runs in the vitest `postgres` project only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime, Queue } from "effect"
import { randomUUID } from "node:crypto"
import type { DomainEvent } from "../../src/domain/Events.js"
import { SophiaLive } from "../../src/layers/App.js"
import { CrossDaemonEvents } from "../../src/layers/CrossDaemon.js"
import { withSearchPath } from "../../src/layers/Pg.js"
import { StoreChoice } from "../../src/layers/Sql.js"
import { Approvals } from "../../src/services/Approvals.js"
import { Auth } from "../../src/services/Auth.js"
import { Coordination } from "../../src/services/Coordination.js"
import { Events } from "../../src/services/Events.js"
import { admin, PG_BASE } from "../support/PgAdmin.js"

// a gated call is refused at once (the approval stays pending), as on a daemon since wave 2
process.env.SOPHIA_APPROVAL_WAIT_MS = "0"

const daemon = (url: string) => ManagedRuntime.make(CrossDaemonEvents.pipe(Layer.provideMerge(SophiaLive(StoreChoice.postgres(url)))))

describe("cross-daemon wake-ups (LISTEN/NOTIFY)", () => {
  it("a post, a revocation and a decided approval on daemon A reach daemon B's listeners", async () => {
    const schema = `t_${randomUUID().replaceAll("-", "")}`
    await admin(`CREATE SCHEMA ${schema}`)
    const url = withSearchPath(PG_BASE, schema)
    const a = daemon(url)
    try {
      const { alice, bob } = await a.runPromise(Effect.gen(function*() {
        const auth = yield* Auth
        const alice = yield* auth.createConnection({ name: "alice", profile: "full" })
        const bob = yield* auth.createConnection({ name: "bob", profile: "assistant" })
        return { alice, bob }
      }))
      const b = daemon(url)
      try {
        // B listens for as long as this scope lives; A writes
        const got = await b.runPromise(Effect.scoped(Effect.gen(function*() {
          const queue = yield* (yield* Events).listen
          const caller = yield* (yield* Auth).authenticate(alice.bearer)
          const assistant = yield* (yield* Auth).authenticate(bob.bearer)
          const took: Array<DomainEvent> = []
          const post = yield* Effect.promise(() =>
            a.runPromise(Effect.flatMap(Coordination, (c) => c.post(caller, { channel: "x", kind: "status", body: "hi" })))
          )
          // a gated call refused at once (no wait), leaving its approval pending
          yield* Effect.promise(() =>
            a.runPromise(Effect.flatMap(Approvals, (ap) =>
              Effect.flip(ap.gate({
                caller: assistant,
                tool: { name: "sophia.add_document", access: "write" },
                args: { title: "t", body: "b" },
                decision: "approval",
                execute: Effect.succeed("ran")
              }))
            ))
          )
          const pending = yield* Effect.promise(() => a.runPromise(Effect.flatMap(Approvals, (ap) => ap.list())))
          yield* Effect.promise(() => a.runPromise(Effect.flatMap(Approvals, (ap) => ap.decide(pending[0].approval_id, "approved"))))
          yield* Effect.promise(() => a.runPromise(Effect.flatMap(Auth, (auth) => auth.revoke("bob"))))
          const started = Date.now()
          while (took.length < 4 && Date.now() - started < 10_000) {
            const e = yield* Queue.take(queue).pipe(Effect.timeout("10 seconds"))
            if (e._tag === "PostLanded" || e._tag === "ApprovalRequested" || e._tag === "ApprovalDecided" || e._tag === "ConnectionRevoked") took.push(e)
          }
          return { took, post }
        })))
        const tags = got.took.map((e) => e._tag).sort()
        assert.deepStrictEqual(tags, ["ApprovalDecided", "ApprovalRequested", "ConnectionRevoked", "PostLanded"])
        const landed = got.took.find((e) => e._tag === "PostLanded")!
        assert.strictEqual((landed as any).post_id, got.post.post_id)
      } finally {
        await b.dispose()
      }
    } finally {
      await a.dispose()
      await admin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    }
  }, 120_000)
})
