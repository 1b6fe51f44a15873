import { Effect, Schema } from "effect"
import type { LedgerEvent } from "../../domain/Ledger.js"
import { settle } from "../../domain/LedgerCore.js"
import { eventHash, stateHash } from "../../domain/LedgerHash.js"
import type { ChainBreak, StoredEventValues } from "../../domain/LedgerReplay.js"
import { replay, REPLAY_START, replayStored } from "../../domain/LedgerReplay.js"
import { spanned } from "../Spans.js"
import { EventFromRow, EventRow } from "./Rows.js"
import type { LedgerChain } from "./Chain.js"
import { EVENT_PAGE } from "./Chain.js"
import type { LedgerStore } from "./Store.js"

export interface VerifyReport {
  readonly ok: boolean
  readonly work_items: number
  readonly events: number
  readonly first_break: (ChainBreak & { readonly user_id: string; readonly work_id: string }) | null
}

type Item = { readonly user_id: string; readonly work_id: string }

const RawEvents = Schema.Array(EventRow)
const DecodedEvents = Schema.Array(EventFromRow)

/** Whether canonical JSON can hold the event (an older build took values nested thousands deep). */
const hashable = (e: LedgerEvent) => {
  try {
    return eventHash(e).length > 0
  } catch {
    return false
  }
}

/**
 * The ledger's verification (a module of the Ledger service, behind `sophia ledger verify` and the
 * portal): every hash and every state recomputed from the stored chains and compared with the tables.
 */
export const makeVerify = (store: LedgerStore, chain: LedgerChain) => {
  /**
   * One item checked the exact way: every row through the contract's Schema, `replay`, the tables.
   * Says what the break is, and where; `count` is the events counted so far, this item's included.
   */
  const verifyExactly = (item: Item, items: number, counted: number) =>
    Effect.gen(function*() {
      const rows = yield* chain.chainRows(item.user_id, item.work_id)
      const count = counted + rows.length
      const at = (b: ChainBreak) => ({
        count,
        report: {
          ok: false,
          work_items: items,
          events: count,
          first_break: { user_id: item.user_id, work_id: item.work_id, ...b }
        } satisfies VerifyReport
      })
      const raw = Schema.decodeUnknownEither(RawEvents)(rows)
      if (raw._tag === "Left") return at({ seq: 0, reason: "an event's data is not JSON" })
      const decoded = Schema.decodeUnknownEither(DecodedEvents)(rows)
      if (decoded._tag === "Left") return at({ seq: 0, reason: "an event is not in the ledger contract's vocabulary" })
      // a stored event canonical JSON cannot hold (an older build took values nested thousands deep) is a
      // break at that event, reported like any other: verify itself never dies of it
      let replayed: ReturnType<typeof replay>
      try {
        replayed = replay(decoded.right)
      } catch (error) {
        const bad = decoded.right.find((e) => !hashable(e))
        return at({ seq: bad?.seq ?? 0, reason: `event cannot be hashed: ${String((error as Error)?.message ?? error)}` })
      }
      if (replayed.break) return at(replayed.break)
      const stored = yield* store.loadState(item.user_id, item.work_id)
      if (!stored || !replayed.state) return at({ seq: decoded.right.length, reason: "work item has no head row or no events" })
      let fromScratch: string
      let materialized: string
      try {
        fromScratch = stateHash(settle(replayed.state))
        materialized = stateHash(stored)
      } catch (error) {
        return at({ seq: replayed.state.seq, reason: `settled state cannot be hashed: ${String((error as Error)?.message ?? error)}` })
      }
      if (stored.head !== replayed.state.head) {
        return at({ seq: replayed.state.seq, reason: "head row does not match the last event", expected: replayed.state.head, actual: stored.head })
      }
      if (fromScratch !== materialized) {
        return at({ seq: replayed.state.seq, reason: "settled state differs from the replayed state", expected: fromScratch, actual: materialized })
      }
      return { count, report: undefined }
    })

  /**
   * One item checked the fast way: its rows in pages, each read and hashed by plain functions
   * (`replayStored`), then the tables compared. The number of events when the item is clean; undefined
   * at anything else, for `verifyExactly` to say what it is.
   */
  const verifyClean = (item: Item) =>
    Effect.gen(function*() {
      let cursor = REPLAY_START
      let count = 0
      for (;;) {
        // rows as arrays (`StoredEventValues`), in the order of STORED_EVENT_COLUMNS
        const rows = yield* chain.eventPage({ userId: item.user_id, workId: item.work_id, after: cursor.seq })
        count += rows.length
        const next = replayStored(rows as ReadonlyArray<StoredEventValues>, cursor)
        if (next === undefined) return undefined
        cursor = next
        if (rows.length < EVENT_PAGE) break
      }
      const replayed = cursor.state
      if (replayed === null) return undefined
      const stored = yield* store.loadState(item.user_id, item.work_id)
      if (!stored || stored.head !== replayed.head) return undefined
      try {
        return stateHash(settle(replayed)) === stateHash(stored) ? count : undefined
      } catch {
        return undefined
      }
    })

  /**
   * Recompute every hash and every state from scratch, item by item, and compare with what the
   * tables hold (head, seq, settled state). Reports the first break. An item is first checked the
   * fast way, which only ever certifies a clean item; whatever it does not certify is checked again
   * the exact way, which reports the break as it always did.
   */
  const verify = spanned("Ledger.verify", Effect.fnUntraced(function*(options: { readonly userId?: string | undefined } = {}) {
    const items = yield* chain.items(options.userId)
    let count = 0
    for (const item of items) {
      const clean = yield* verifyClean(item)
      if (clean !== undefined) {
        count += clean
        continue
      }
      const exact = yield* verifyExactly(item, items.length, count)
      if (exact.report !== undefined) return exact.report
      count = exact.count
    }
    return { ok: true, work_items: items.length, events: count, first_break: null } satisfies VerifyReport
  }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

  return { verify } as const
}
