import { Effect, Option } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { connectionShort } from "../../domain/Auth.js"
import { NotFound, ValidationError } from "../../domain/Errors.js"
import type { LedgerDiff, LedgerDiffInput, LedgerLog, LedgerLogInput, LedgerStatus } from "../../domain/Ledger.js"
import type { Working } from "../../domain/LedgerCore.js"
import { applyEvent } from "../../domain/LedgerCore.js"
import { stateHash } from "../../domain/LedgerHash.js"
import { replay } from "../../domain/LedgerReplay.js"
import { nowIso } from "../../domain/Time.js"
import type { Auth } from "../Auth.js"
import { spanned } from "../Spans.js"
import type { LedgerChain } from "./Chain.js"
import type { LedgerStore } from "./Store.js"

/**
 * The ledger's reads of one work item (a module of the Ledger service): its status, log and diff for
 * agents; its events and materialized state for replay and tests. (The work lists are Lists.ts.)
 */
export const makeReads = (deps: { readonly store: LedgerStore; readonly chain: LedgerChain; readonly auth: Auth }) => {
  const { auth, chain, store } = deps

  const mustState = (userId: string, workId: string) =>
    Effect.flatMap(store.loadState(userId, workId), (s) => s ? Effect.succeed(s) : Effect.fail(new NotFound({ what: "work item", id: workId })))

  /** Settled state (from the ledger) kept apart from what is observed at read time. */
  const status = spanned("Ledger.status", Effect.fnUntraced(function*(caller: Caller, workId: string) {
    const settled = yield* mustState(caller.userId, workId)
    const observedAt = yield* nowIso
    const pending = Object.values(settled.reviews).filter((r) => r.status === "pending")
    let claimant: LedgerStatus["observed"]["claimant"] = null
    if (settled.claimant !== null) {
      // the claimant as Auth knows it now (another user's connection is never shown)
      const info = Option.filter(yield* auth.get(settled.claimant), (c) => c.user_id === caller.userId)
      claimant = {
        connection_id: settled.claimant,
        connection_short: connectionShort(settled.claimant),
        agent_name: Option.isSome(info) ? info.value.name : "",
        last_seen_at: Option.isSome(info) ? info.value.last_seen_at : null,
        revoked: Option.isNone(info) || info.value.revoked_at !== null
      }
    }
    const result: LedgerStatus = {
      work_id: workId,
      // the head where every ledger tool reports it (top level), and within the settled state as well
      head: settled.head,
      settled: {
        head: settled.head,
        seq: settled.seq,
        title: settled.title,
        status: settled.status,
        resolution: settled.resolution,
        claimant: settled.claimant,
        fields: settled.fields,
        reviews: Object.values(settled.reviews).sort((a, b) => a.requested_seq - b.requested_seq),
        state_hash: stateHash(settled)
      },
      observed: {
        observed_at: observedAt,
        pending_reviews: pending.map((r) => ({
          request_id: r.request_id,
          artifact: r.artifact,
          reviewer: r.reviewer,
          requested_by: r.requested_by,
          requested_seq: r.requested_seq
        })),
        claimant
      }
    }
    return result
  }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

  /** Events, newest first, with their hashes; page with `before_seq`. */
  const log = spanned("Ledger.log", Effect.fnUntraced(function*(caller: Caller, input: LedgerLogInput) {
    const row = yield* store.loadWork(caller.userId, input.work_id)
    if (!row) return yield* new NotFound({ what: "work item", id: input.work_id })
    const limit = Math.min(Math.max(input.limit ?? 50, 1), 200)
    const rows = yield* chain.logPage(caller.userId, input.work_id, input.before_seq, limit + 1)
    const page = rows.slice(0, limit)
    const result: LedgerLog = {
      work_id: input.work_id,
      head: row.head,
      events: page,
      next_before_seq: rows.length > limit ? page[page.length - 1].seq : null
    }
    return result
  }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

  /** Field changes (value and evidence, before and after) between two heads of one work item. */
  const diff = spanned("Ledger.diff", Effect.fnUntraced(function*(caller: Caller, input: LedgerDiffInput) {
    const row = yield* store.loadWork(caller.userId, input.work_id)
    if (!row) return yield* new NotFound({ what: "work item", id: input.work_id })
    const seqOf = (hash: string) =>
      Effect.flatMap(
        chain.seqOfHash(caller.userId, input.work_id, hash),
        (seq) => seq === undefined ? Effect.fail(new NotFound({ what: "head", id: hash })) : Effect.succeed(seq)
      )
    const fromSeq = yield* seqOf(input.from)
    const toHead = input.to ?? row.head
    const toSeq = yield* seqOf(toHead)
    if (fromSeq > toSeq) {
      return yield* new ValidationError({ detail: `from (seq ${fromSeq}) is later than to (seq ${toSeq}); swap them` })
    }
    const history = yield* chain.chainUpTo(caller.userId, input.work_id, toSeq)
    const before = replay(history.slice(0, fromSeq)).state!
    const beforeFields = { ...before.fields }
    const beforeStatus = { status: before.status, claimant: before.claimant }
    let after: Working = before
    for (const e of history.slice(fromSeq)) {
      const applied = applyEvent(after, e)
      if ("refusal" in applied) return yield* Effect.die(new Error(`ledger ${input.work_id} does not replay at seq ${e.seq}`))
      after = applied.state
    }
    const names = [...new Set([...Object.keys(beforeFields), ...Object.keys(after.fields)])].sort()
    const changes = names
      .filter((n) => beforeFields[n]?.seq !== after.fields[n]?.seq)
      .map((n) => ({ field: n, before: beforeFields[n] ?? null, after: after.fields[n] ?? null }))
    const result: LedgerDiff = {
      work_id: input.work_id,
      from: { head: input.from, seq: fromSeq },
      to: { head: toHead, seq: toSeq },
      events: toSeq - fromSeq,
      status: { before: beforeStatus.status, after: after.status },
      claimant: { before: beforeStatus.claimant, after: after.claimant },
      changes
    }
    return result
  }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

  /** Every event of one work item, oldest first (for replay and tests). */
  const events = spanned("Ledger.events", Effect.fnUntraced(function*(userId: string, workId: string) {
    return yield* chain.chain(userId, workId)
  }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

  /** The materialized settled state (from the tables), or none. */
  const state = spanned("Ledger.state", Effect.fnUntraced(function*(userId: string, workId: string) {
    return yield* store.loadState(userId, workId)
  }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

  return { status, log, diff, events, state } as const
}
