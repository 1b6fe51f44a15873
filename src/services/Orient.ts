import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../domain/Auth.js"
import type { OrientInput, OrientOutput, SurfaceSummary } from "../domain/Orient.js"
import { DbInt } from "../domain/Time.js"
import { SqlBoolean } from "../domain/Waits.js"
import { Coordination } from "./Coordination.js"
import { Knowledge } from "./Knowledge.js"
import { Ledger } from "./Ledger.js"
import { spanned } from "./Spans.js"
import { makeFixedStatements } from "./Statements.js"
import { Waits } from "./Waits.js"

const Counts = Schema.Struct({
  posts: DbInt,
  channels: DbInt,
  open_waits: DbInt,
  unread: DbInt,
  open: SqlBoolean
})
const decodeCounts = Schema.decodeUnknown(Schema.Tuple(Counts))
const noBlocking: OrientOutput["my_open_waits"] = []
const noWork: OrientOutput["my_claimed_work"] = []
const noOrphanedWork: OrientOutput["orphaned"]["work"] = []
const decodeCountsWithDocuments = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ ...Counts.fields, documents: DbInt })))

/**
 * The use case behind `sophia.orient`: what one call needs to bootstrap a session — who the caller is,
 * counts across its user (documents within its entity scope), its unread, its open waits and the work
 * it has claimed. It owns no table: each count is an SQL expression asked of the service that owns the
 * table, and they are read together in one statement (one snapshot, one round trip: `orient` is the
 * read `execute_code` snippets compose most). What only some callers have — open waits, claimed work,
 * orphans, an entity scope — is read only when the counts say it exists. Nothing here writes (the
 * caller's wait signals are read without being delivered; the envelope delivers those).
 */
export class Orient extends Effect.Service<Orient>()("sophia/Orient", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const coordination = yield* Coordination
    const waits = yield* Waits
    const ledger = yield* Ledger
    const knowledge = yield* Knowledge
    const fixed = yield* makeFixedStatements

    // (each parameter appears once, in order: a fixed statement binds them positionally)
    const countsOf = (u1: string, u2: string, u3: string, u4: string, u5: string, c1: string, c2: string) =>
      sql`SELECT ${coordination.postsCountExpr(u1)} AS posts, ${coordination.channelsCountExpr(u2)} AS channels,
        ${waits.countOpenExpr(u3)} AS open_waits, ${coordination.unreadExpr(u4, u5, c1)} AS unread,
        ${waits.openExpr(c2)} AS open`
    const probe = fixed(countsOf)
    // a caller without an entity scope sees every live document of its user: its count joins the probe
    const probeWithDocuments = fixed((
      u1: string,
      u2: string,
      u3: string,
      u4: string,
      u5: string,
      c1: string,
      c2: string,
      u6: string
    ) => sql`${countsOf(u1, u2, u3, u4, u5, c1, c2)}, ${knowledge.unscopedDocumentsExpr(u6)} AS documents`)

    const counts = (caller: Caller) => {
      const u = caller.userId
      const c = caller.connectionId
      return caller.entityScope.length === 0
        ? Effect.map(Effect.flatMap(probeWithDocuments(u, u, u, u, u, c, c, u), decodeCountsWithDocuments), ([row]) => row)
        : Effect.flatMap(
          Effect.flatMap(probe(u, u, u, u, u, c, c), decodeCounts),
          ([row]) => Effect.map(knowledge.countDocuments(caller), (documents) => ({ ...row, documents }))
        )
    }

    const orient = spanned("Orient.orient", Effect.fnUntraced(function*(caller: Caller, input: OrientInput, surface: SurfaceSummary) {
      const n = yield* counts(caller)
      // (the work count stays a call of the Ledger's own method: the Ledger is the service built to be
      // swapped for one that keeps no table — test/Architecture.test.ts runs orient over such a fake)
      const workItems = yield* ledger.countWork(caller.userId)
      const blocking = n.open
        ? (yield* waits.signalsAfter(caller, { open: true, undelivered: false }, false)).blocking
        : noBlocking
      const claimed = workItems > 0 ? yield* ledger.claimedBy(caller.userId, caller.connectionId) : noWork
      const orphanedWork = workItems > 0 ? yield* ledger.orphanedWork(caller.userId) : noOrphanedWork
      const orphanedWaits = n.open_waits > 0 ? yield* waits.countOrphaned(caller) : 0
      const result: OrientOutput = {
        connection_id: caller.connectionId,
        connection_short: caller.connectionShort,
        name: caller.name,
        profile: caller.profile,
        user_id: caller.userId,
        entity_scope: caller.entityScope,
        ...(input.goal !== undefined ? { goal: input.goal } : {}),
        counts: { posts: n.posts, channels: n.channels, open_waits: n.open_waits, work_items: workItems, documents: n.documents },
        unread: n.unread,
        my_open_waits: blocking,
        my_claimed_work: claimed,
        orphaned: { work: orphanedWork, waits: orphanedWaits },
        total_tools: surface.total_tools,
        version_hash: surface.version_hash,
        server_git_sha: surface.server_git_sha
      }
      return result
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    return { orient } as const
  })
}) {}
