import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import type { WorkSummary } from "../../domain/Ledger.js"
import type { OrphanedWork } from "../../domain/Orphans.js"
import { orphanOf } from "../../domain/Orphans.js"
import { DbInt } from "../../domain/Time.js"
import type { Auth } from "../Auth.js"
import { spanned } from "../Spans.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"
import { ListedRow, SummaryRow } from "./Rows.js"

/** Claim lists show at most this many items per connection (newest first). */
const CLAIMED_MAX = 50

/**
 * The ledger's work lists (a module of the Ledger service), with their statements: how many items a user
 * has, the items each connection holds the claim on and those whose claimant is gone — for orient, the
 * wait graph and the portal — and the owner's list of every item.
 */
export const makeLists = (deps: { readonly auth: Auth; readonly silentAfterS: number }) =>
  Effect.gen(function*() {
    const { auth, silentAfterS } = deps
    const sql = yield* SqlClient.SqlClient
    const { named } = yield* makeStatements

    const selectCount = named("Ledger.countWork", (p: { userId: string }) =>
      sql`SELECT COUNT(*) AS n FROM ledger_work WHERE user_id = ${p.userId}`)
    const decodeCount = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ n: DbInt })))

    const selectClaimedBy = named("Ledger.claimedBy", (p: { userId: string; connectionId: string }) =>
      sql`SELECT work_id, title, status, head, seq FROM ledger_work
        WHERE user_id = ${p.userId} AND claimant = ${p.connectionId} AND status <> 'closed'
        ORDER BY updated_at DESC, work_id ${limitTo(sql, CLAIMED_MAX)}`)
    const decodeSummaries = Schema.decodeUnknown(Schema.Array(SummaryRow))

    // every claimant's newest CLAIMED_MAX, as `selectClaimedBy` reads them for one (ties in updated_at
    // broken by work_id in both)
    const selectClaimedByAll = named("Ledger.claimedByConnections", (p: { userId: string }) =>
      sql`SELECT claimant, work_id, title, status, head, seq FROM (
          SELECT claimant, work_id, title, status, head, seq, updated_at,
            ROW_NUMBER() OVER (PARTITION BY claimant ORDER BY updated_at DESC, work_id) AS nth
          FROM ledger_work WHERE user_id = ${p.userId} AND claimant IS NOT NULL AND status <> 'closed') c
        WHERE nth <= ${sql.literal(String(CLAIMED_MAX))} ORDER BY claimant, updated_at DESC, work_id`)
    const decodeClaimedByAll = Schema.decodeUnknown(Schema.Array(Schema.Struct({ claimant: Schema.String, ...SummaryRow.fields })))

    // one statement per page size (a LIMIT is text)
    const selectList = family((limit: number) =>
      named("Ledger.listWork", (p: { userId: string }) =>
        sql`SELECT work_id, title, status, claimant, head, seq, updated_at FROM ledger_work
          WHERE user_id = ${p.userId} ORDER BY updated_at DESC, work_id ${limitTo(sql, limit)}`))
    const decodeList = Schema.decodeUnknown(Schema.Array(ListedRow))

    const selectClaims = named("Ledger.claims", (p: { userId: string }) =>
      sql`SELECT work_id, title, claimant FROM ledger_work
        WHERE user_id = ${p.userId} AND claimant IS NOT NULL AND status <> 'closed'
        ORDER BY work_id`)
    const decodeClaims = Schema.decodeUnknown(Schema.Array(Schema.Struct({
      work_id: Schema.String,
      title: Schema.String,
      claimant: Schema.String
    })))

    /** How many work items the user has. */
    const countWork = spanned("Ledger.countWork", Effect.fnUntraced(function*(userId: string) {
      const [row] = yield* Effect.flatMap(selectCount({ userId }), decodeCount)
      return row.n
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /** The open work items a connection holds the claim on (newest first, at most 50). */
    const claimedBy = spanned("Ledger.claimedBy", Effect.fnUntraced(function*(userId: string, connectionId: string) {
      return (yield* Effect.flatMap(selectClaimedBy({ userId, connectionId }), decodeSummaries)) as ReadonlyArray<WorkSummary>
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /**
     * Every open item claimed by any of the user's connections, by claimant connection id (what
     * `claimedBy` gives for each), in one statement: the portal's fleet view.
     */
    const claimedByConnections = spanned("Ledger.claimedByConnections", Effect.fnUntraced(function*(userId: string) {
      const rows = yield* Effect.flatMap(selectClaimedByAll({ userId }), decodeClaimedByAll)
      const byClaimant = new Map<string, Array<WorkSummary>>()
      for (const { claimant, ...item } of rows) {
        const held = byClaimant.get(claimant)
        if (held === undefined) byClaimant.set(claimant, [item])
        else held.push(item)
      }
      return byClaimant as ReadonlyMap<string, ReadonlyArray<WorkSummary>>
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /** The user's work items, most recently moved first (the owner's dashboard), at most `limit` (≤ 1000). */
    const listWork = spanned("Ledger.listWork", Effect.fnUntraced(function*(userId: string, limit = 200) {
      return yield* Effect.flatMap(selectList(Math.min(Math.max(1, Math.trunc(limit)), 1000))({ userId }), decodeList)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /** The user's open work items whose claimant is revoked or silent: the claims half of the orphans. */
    const orphanedWork = spanned("Ledger.orphanedWork", Effect.fnUntraced(function*(userId: string) {
      const rows = yield* Effect.flatMap(selectClaims({ userId }), decodeClaims)
      if (rows.length === 0) return []
      const connections = yield* auth.connections(rows.map((r) => r.claimant))
      const now = yield* Clock.currentTimeMillis
      return rows.flatMap((r): Array<OrphanedWork> => {
        const gone = orphanOf(connections.get(r.claimant), now, silentAfterS)
        return gone === undefined ? [] : [{ work_id: r.work_id, title: r.title, connection_id: r.claimant, ...gone }]
      })
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    return { countWork, claimedBy, claimedByConnections, listWork, orphanedWork } as const
  })

/** What `makeLists` gives: the ledger's list methods. */
export type Lists = Effect.Effect.Success<ReturnType<typeof makeLists>>
