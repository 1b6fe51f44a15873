import { Effect } from "effect"
import { NotFound, ValidationError } from "../../domain/Errors.js"
import { LedgerAppended } from "../../domain/Events.js"
import { checkJson, formatJsonIssue, JSON_MAX_DEPTH } from "../../domain/Json.js"
import type { AppendResult, LedgerEvent } from "../../domain/Ledger.js"
import { HeadMoved } from "../../domain/Ledger.js"
import type { Draft, FoldRefusal, Working } from "../../domain/LedgerCore.js"
import { applyEvent, REVIEW_FIELD } from "../../domain/LedgerCore.js"
import { hashAndData, jcs } from "../../domain/LedgerHash.js"
import { nowIso } from "../../domain/Time.js"
import type { Events } from "../Events.js"
import type { Taken } from "./InHand.js"
import { makeInHand } from "./InHand.js"
import type { WorkRow } from "./Rows.js"
import { reviewOf, workingOf } from "./Rows.js"
import type { LedgerStore } from "./Store.js"

/** The actor of what the server observed itself. */
export const SERVER = "server"

/** `commit`'s expected head for the server's own observations: whatever the head is when it reads it. */
export const CURRENT: unique symbol = Symbol("sophia/Ledger/current-head")

/** Drafts `commit` puts ahead of an append's, decided on the head row it read (and the fields they touch). */
export interface Lead {
  readonly fields: ReadonlyArray<string>
  readonly drafts: (row: WorkRow) => Effect.Effect<ReadonlyArray<Draft>>
}

/** The fields and reviews an append touches: loaded with the head row, nothing else. */
const touchedBy = (drafts: ReadonlyArray<Draft>, lead: Lead | undefined) => {
  const names = new Set<string>(lead?.fields)
  const ids = new Set<string>()
  for (const d of drafts) {
    if (d.type === "asserted" || d.type === "observed") names.add((d.data as { field: string }).field)
    if (d.type === "review_verdict") {
      names.add(REVIEW_FIELD)
      ids.add((d.data as { request_id: string }).request_id)
    }
  }
  return { names, ids }
}

/** What folding an append's drafts gave: the events, their data's JCS, and the state after them. */
interface Folded {
  readonly state: Working
  readonly appended: ReadonlyArray<LedgerEvent>
  readonly dataJcs: ReadonlyArray<string>
  readonly touchedFields: ReadonlySet<string>
  readonly touchedReviews: ReadonlySet<string>
}

/**
 * Fold the drafts onto the state at `head` (in place), each made the event chained to the one before it:
 * seq, parent, time and hash. The first refusal, when one is not a valid transition (the state is then
 * to be discarded).
 */
const fold = (
  workId: string,
  head: string | null,
  start: Working | null,
  drafts: ReadonlyArray<Draft>,
  at: string
): Folded | { readonly refusal: FoldRefusal } => {
  let state = start
  let parent = head
  let seq = state ? state.seq : 0
  const appended: Array<LedgerEvent> = []
  const dataJcs: Array<string> = []
  const touchedFields = new Set<string>()
  const touchedReviews = new Set<string>()
  for (const d of drafts) {
    seq += 1
    const body = { work_id: workId, seq, parent, type: d.type, data: d.data, evidence: d.evidence, actor: d.actor, at } as Omit<LedgerEvent, "hash">
    const hashed = hashAndData(body)
    const event = { ...body, hash: hashed.hash } as LedgerEvent
    const applied = applyEvent(state, event)
    if ("refusal" in applied) return applied
    state = applied.state
    appended.push(event)
    dataJcs.push(hashed.data)
    parent = event.hash
    if (event.type === "asserted" || event.type === "observed") touchedFields.add(event.data.field)
    if (event.type === "review_requested" || event.type === "review_verdict") touchedReviews.add(event.data.request_id)
    if (event.type === "review_verdict" && event.data.verdict === "approved") touchedFields.add(REVIEW_FIELD)
  }
  return { state: state!, appended, dataJcs, touchedFields, touchedReviews }
}

/**
 * The state at the expected head read from the tables: the head row with the fields the drafts touch
 * (and the reviews they answer), refused when the head is not the one expected; with the lead's drafts
 * (decided on that row) ahead of `drafts`.
 */
const readAt = (
  store: LedgerStore,
  userId: string,
  workId: string,
  expected: string | null | typeof CURRENT,
  names: ReadonlySet<string>,
  ids: ReadonlySet<string>,
  drafts: ReadonlyArray<Draft>,
  lead: Lead | undefined
) =>
  Effect.gen(function*() {
    const joined = names.size === 0 ? undefined : yield* store.headWithFields(userId, workId, [...names])
    const row: WorkRow | undefined = joined === undefined ? yield* store.loadWork(userId, workId) : joined[0]
    if (expected === CURRENT) {
      if (!row) return yield* new NotFound({ what: "work item", id: workId })
    } else if (expected === null) {
      if (row) return yield* new HeadMoved({ work_id: workId, expected, actual: row.head })
    } else if (!row || row.head !== expected) {
      return yield* new HeadMoved({ work_id: workId, expected, actual: row?.head ?? null })
    }
    const state = row ? workingOf(workId, row) : null
    if (state) {
      for (const j of joined ?? []) {
        if (j.f_field !== null) {
          state.fields[j.f_field] = { value: JSON.parse(j.f_value!), evidence: j.f_evidence!, set_by: j.f_set_by!, at: j.f_at!, seq: j.f_seq! }
        }
      }
      if (ids.size > 0) {
        for (const r of yield* store.loadReviews(userId, workId, [...ids])) state.reviews[r.request_id] = reviewOf(r)
      }
    }
    const all = lead !== undefined && row ? [...(yield* lead.drafts(row)), ...drafts] : drafts
    return { head: row?.head ?? null, state, all }
  })

/** Move the head (the compare-and-swap), then insert the events and the changed fields and reviews. */
const write = (store: LedgerStore, userId: string, workId: string, head: string | null, at: string, folded: Folded) =>
  Effect.gen(function*() {
    const s = folded.state
    const row = {
      userId,
      workId,
      head: s.head,
      seq: s.seq,
      title: s.title,
      status: s.status,
      resolution: s.resolution,
      claimant: s.claimant,
      workers: JSON.stringify(s.workers),
      at
    }
    // compare-and-swap on the head: exactly one writer extends a given head
    const moved = head !== null ? yield* store.moveHead({ ...row, expected: head }) : yield* store.createHead(row)
    if (moved.length === 0) {
      const now = yield* store.loadWork(userId, workId)
      return yield* new HeadMoved({ work_id: workId, expected: head, actual: now?.head ?? null })
    }
    for (let i = 0; i < folded.appended.length; i++) {
      const e = folded.appended[i]
      yield* store.insertEvent({
        userId,
        workId,
        seq: e.seq,
        parent: e.parent,
        type: e.type,
        data: folded.dataJcs[i],
        evidence: e.evidence,
        actor: e.actor,
        at: e.at,
        hash: e.hash
      })
    }
    for (const field of folded.touchedFields) {
      const f = s.fields[field]
      yield* store.upsertField({ userId, workId, field, value: jcs(f.value), evidence: f.evidence, setBy: f.set_by, at: f.at, seq: f.seq })
    }
    for (const requestId of folded.touchedReviews) {
      const r = s.reviews[requestId]
      yield* store.upsertReview({
        requestId,
        userId,
        workId,
        uri: r.artifact.uri,
        sha256: r.artifact.sha256,
        reviewer: r.reviewer,
        requestedBy: r.requested_by,
        requestedSeq: r.requested_seq,
        status: r.status,
        verdictBy: r.verdict_by,
        verdictSeq: r.verdict_seq
      })
    }
  })

/**
 * The ledger's one write path (a module of the Ledger service): the append rules every entry point goes
 * through — the compare-and-swap on the head (races), and the fold that refuses evidence downgrades,
 * self-certification and invalid transitions.
 */
export const makeCommit = (store: LedgerStore, events: Events) => {
  const hands = makeInHand()

  /**
   * The one write path: inside one transaction, take the state at the expected head (in hand, or read
   * once from the head row with the fields the drafts touch), fold the drafts onto it, move the head by
   * one conditional UPDATE (zero rows = refused: the compare-and-swap, which holds on Postgres too,
   * where another writer may move the head between a read and the UPDATE), insert the events and the
   * changed fields and reviews, and publish `LedgerAppended`. All or nothing. `expected` is `CURRENT`
   * for the server's own observations (whatever the head is; no head row is `NotFound`). `lead`, when
   * given, adds drafts ahead of `drafts` from the head row read (a claim takeover), with their fields.
   *
   * The state in hand (InHand.ts): when the expected head is one in hand (with every field and review
   * the drafts touch known), the append needs no read. A refusal the fold finds on a state in hand is
   * returned only once a read confirmed the head (a moved head is refused as such first, as when the
   * head is read).
   */
  const commit = (
    userId: string,
    workId: string,
    expected: string | null | typeof CURRENT,
    drafts: ReadonlyArray<Draft>,
    lead?: Lead
  ) =>
    Effect.gen(function*() {
      if (drafts.length === 0) return yield* new ValidationError({ detail: "events must hold at least one event" })
      // whatever the entry point, nothing is hashed that canonical JSON cannot hold (depth, lone surrogates)
      for (const d of drafts) {
        const issue = checkJson(d.data, JSON_MAX_DEPTH + 1)
        if (issue) return yield* new ValidationError({ detail: formatJsonIssue(issue, "data") })
      }
      const { ids, names } = touchedBy(drafts, lead)
      const hand: Taken | undefined = typeof expected === "string" && lead === undefined
        ? hands.take(userId, workId, expected, names, ids)
        : undefined
      const start = hand !== undefined
        ? { head: hand.head, state: hand.state, all: drafts }
        : yield* readAt(store, userId, workId, expected, names, ids, drafts, lead)
      const at = yield* nowIso
      const folded = fold(workId, start.head, start.state, start.all, at)
      if ("refusal" in folded) {
        if (hand !== undefined) {
          const now = yield* store.loadWork(userId, workId)
          if (now?.head !== start.head) return yield* new HeadMoved({ work_id: workId, expected: start.head, actual: now?.head ?? null })
        }
        return yield* folded.refusal
      }
      yield* write(store, userId, workId, start.head, at, folded)
      const s = folded.state
      hands.keep(userId, workId, s, names, folded.touchedFields, ids, folded.touchedReviews, hand)
      // our own values, already of the event's shape: constructed without re-validating them
      yield* events.publish(
        new LedgerAppended({ user_id: userId, work_id: workId, head: s.head, seq: s.seq, types: folded.appended.map((e) => e.type) }, true)
      )
      return { work_id: workId, head: s.head, seq: s.seq } satisfies AppendResult
    }).pipe(events.transaction)

  return commit
}

/** What `makeCommit` gives: the one write path. */
export type Commit = ReturnType<typeof makeCommit>
