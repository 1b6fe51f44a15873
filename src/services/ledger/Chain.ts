import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { STORED_EVENT_COLUMNS } from "../../domain/LedgerReplay.js"
import { DbInt } from "../../domain/Time.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"
import { EventFromRow } from "./Rows.js"

/** How many events `eventPage` reads at a time. */
export const EVENT_PAGE = 4096

/**
 * The ledger's chains as stored (`ledger_events`): every statement that reads events, each a named
 * statement — for the log and the diff, for `events`, and for verify (rows as they are, or in pages of
 * values). A module of the Ledger service; the events are written by the store's `insertEvent`.
 */
export const makeLedgerChain = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, namedValues } = yield* makeStatements

  const selectChain = named("Ledger.chain", (p: { userId: string; workId: string }) =>
    sql`SELECT work_id, seq, parent, type, data, evidence, actor, at, hash FROM ledger_events
      WHERE user_id = ${p.userId} AND work_id = ${p.workId} ORDER BY seq`)
  const selectChainUpTo = named("Ledger.chainUpTo", (p: { userId: string; workId: string; upTo: number }) =>
    sql`SELECT work_id, seq, parent, type, data, evidence, actor, at, hash FROM ledger_events
      WHERE user_id = ${p.userId} AND work_id = ${p.workId} AND seq <= ${p.upTo} ORDER BY seq`)
  // one statement per page size (a LIMIT is text)
  const selectLogPage = family((limit: number) =>
    named("Ledger.logPage", (p: { userId: string; workId: string; before: number }) =>
      sql`SELECT work_id, seq, parent, type, data, evidence, actor, at, hash FROM ledger_events
        WHERE user_id = ${p.userId} AND work_id = ${p.workId} AND seq < ${p.before} ORDER BY seq DESC ${limitTo(sql, limit)}`))
  const decodeEvents = Schema.decodeUnknown(Schema.Array(EventFromRow))
  /** Every event of the item as stored, oldest first, not decoded (verify decodes them itself). */
  const chainRows = (userId: string, workId: string) => selectChain({ userId, workId })
  /** Every event of the item, oldest first. */
  const chain = (userId: string, workId: string) => Effect.flatMap(selectChain({ userId, workId }), decodeEvents)
  /** The item's events up to `upTo` (its seq), oldest first. */
  const chainUpTo = (userId: string, workId: string, upTo: number) =>
    Effect.flatMap(selectChainUpTo({ userId, workId, upTo }), decodeEvents)
  /** At most `limit` of the item's events before seq `before` (every one when undefined), newest first. */
  const logPage = (userId: string, workId: string, before: number | undefined, limit: number) =>
    Effect.flatMap(selectLogPage(limit)({ userId, workId, before: before ?? Number.MAX_SAFE_INTEGER }), decodeEvents)

  /** The next `EVENT_PAGE` events after seq `after`, as arrays of values in the order of STORED_EVENT_COLUMNS. */
  const eventPage = namedValues("Ledger.eventPage", (p: { userId: string; workId: string; after: number }) =>
    sql`SELECT ${sql.literal(STORED_EVENT_COLUMNS)} FROM ledger_events
      WHERE user_id = ${p.userId} AND work_id = ${p.workId} AND seq > ${p.after} ORDER BY seq ${limitTo(sql, EVENT_PAGE)}`)

  const selectSeqOfHash = named("Ledger.seqOfHash", (p: { userId: string; workId: string; hash: string }) =>
    sql`SELECT seq FROM ledger_events WHERE user_id = ${p.userId} AND work_id = ${p.workId} AND hash = ${p.hash}`)
  const decodeSeqs = Schema.decodeUnknown(Schema.Array(Schema.Struct({ seq: DbInt })))
  /** The seq of the event of the item with this hash, if there is one. */
  const seqOfHash = (userId: string, workId: string, hash: string) =>
    Effect.map(Effect.flatMap(selectSeqOfHash({ userId, workId, hash }), decodeSeqs), (rows) => rows[0]?.seq)

  // every work item with a head row or an event (an item whose head row is gone is still verified)
  const selectAllItems = named("Ledger.items", () =>
    sql`SELECT user_id, work_id FROM ledger_work
      UNION SELECT DISTINCT user_id, work_id FROM ledger_events ORDER BY user_id, work_id`)
  const selectItemsOf = named("Ledger.itemsOf", (p: { userId: string }) =>
    sql`SELECT user_id, work_id FROM ledger_work WHERE user_id = ${p.userId}
      UNION SELECT DISTINCT user_id, work_id FROM ledger_events WHERE user_id = ${p.userId}
      ORDER BY user_id, work_id`)
  const decodeItems = Schema.decodeUnknown(Schema.Array(Schema.Struct({ user_id: Schema.String, work_id: Schema.String })))
  /** Every work item (of one user, or of all), by user and work id. */
  const items = (userId: string | undefined) =>
    Effect.flatMap(userId === undefined ? selectAllItems({}) : selectItemsOf({ userId }), decodeItems)

  return { chainRows, chain, chainUpTo, logPage, eventPage, seqOfHash, items } as const
})

/** The ledger's chain reads, as its modules receive them. */
export type LedgerChain = Effect.Effect.Success<typeof makeLedgerChain>
