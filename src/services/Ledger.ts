import { SqlClient, SqlSchema } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../domain/Auth.js"
import { connectionShort } from "../domain/Auth.js"
import { arcWorkId } from "../domain/Coordination.js"
import { NotFound, ValidationError } from "../domain/Errors.js"
import { checkJson, formatJsonIssue, JSON_MAX_DEPTH } from "../domain/Json.js"
import type { ConnectionRevoked, PostLanded, WaitResolved } from "../domain/Events.js"
import { LedgerAppended } from "../domain/Events.js"
import type {
  AppendResult,
  LedgerAppendInput,
  LedgerDiff,
  LedgerDiffInput,
  LedgerLog,
  LedgerLogInput,
  LedgerStatus,
  ReviewRequestInput,
  ReviewState,
  ReviewVerdictInput,
  SettledField,
  WorkSummary
} from "../domain/Ledger.js"
import { Evidence, HeadMoved, InvalidTransition, LedgerEvent, ledgerValueIssue, ReviewStatus } from "../domain/Ledger.js"
import type { ChainBreak, Draft, StoredEventValues, Working } from "../domain/LedgerCore.js"
import {
  applyEvent,
  draftOf,
  eventHash,
  hashAndData,
  jcs,
  replay,
  REPLAY_START,
  STORED_EVENT_COLUMNS,
  replayStored,
  REVIEW_FIELD,
  settle,
  stateHash
} from "../domain/LedgerCore.js"
import type { OrphanedWork } from "../domain/Orphans.js"
import { CLAIM_TAKEOVER_FIELD, orphanOf, silentAfterSConfig } from "../domain/Orphans.js"
import { DbInt, nowIso } from "../domain/Time.js"
import { Auth } from "./Auth.js"
import { Events } from "./Events.js"
import { spanned } from "./Spans.js"
import { limitTo, makeFixedStatements } from "./Statements.js"
import { makeStatements } from "./store/Statements.js"

// ---------------------------------------------------------------------------------------------------
// Rows, decoded

const WorkRow = Schema.Struct({
  head: Schema.String,
  seq: DbInt,
  title: Schema.String,
  status: Schema.Literal("open", "closed"),
  resolution: Schema.NullOr(Schema.String),
  claimant: Schema.NullOr(Schema.String),
  workers: Schema.parseJson(Schema.Array(Schema.String))
})
type WorkRow = typeof WorkRow.Type

/** A stored event: its `data` column is the canonical JSON of the event's data. */
const EventRow = Schema.Struct({
  work_id: Schema.String,
  seq: DbInt,
  parent: Schema.NullOr(Schema.String),
  type: Schema.String,
  data: Schema.parseJson(),
  evidence: Schema.String,
  actor: Schema.String,
  at: Schema.String,
  hash: Schema.String
})
/** A stored event decoded into the contract's `LedgerEvent` (never cast). */
const EventFromRow = Schema.compose(EventRow, LedgerEvent, { strict: false })
const decodeEvents = Schema.decodeUnknown(Schema.Array(EventFromRow))
const decodeCount = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ n: DbInt })))

const FieldRow = Schema.Struct({
  field: Schema.String,
  value: Schema.parseJson(),
  evidence: Evidence,
  set_by: Schema.String,
  at: Schema.String,
  seq: DbInt
})
/** The head row joined with the fields an append touches (null columns when it touches none that exist). */
const WorkWithFieldRow = Schema.Struct({
  ...WorkRow.fields,
  f_field: Schema.NullOr(Schema.String),
  f_value: Schema.NullOr(Schema.String),
  f_evidence: Schema.NullOr(Evidence),
  f_set_by: Schema.NullOr(Schema.String),
  f_at: Schema.NullOr(Schema.String),
  f_seq: Schema.NullOr(DbInt)
})

const ReviewRow = Schema.Struct({
  request_id: Schema.String,
  artifact_uri: Schema.String,
  artifact_sha256: Schema.String,
  reviewer: Schema.NullOr(Schema.String),
  requested_by: Schema.String,
  requested_seq: DbInt,
  status: ReviewStatus,
  verdict_by: Schema.NullOr(Schema.String),
  verdict_seq: Schema.NullOr(DbInt)
})
type ReviewRow = typeof ReviewRow.Type

const fieldOf = (r: typeof FieldRow.Type): SettledField => ({
  value: r.value,
  evidence: r.evidence,
  set_by: r.set_by,
  at: r.at,
  seq: r.seq
})

const reviewOf = (r: ReviewRow): ReviewState => ({
  request_id: r.request_id,
  artifact: { uri: r.artifact_uri, sha256: r.artifact_sha256 },
  reviewer: r.reviewer,
  requested_by: r.requested_by,
  requested_seq: r.requested_seq,
  status: r.status,
  verdict_by: r.verdict_by,
  verdict_seq: r.verdict_seq
})

const workingOf = (workId: string, row: WorkRow): Working => ({
  work_id: workId,
  head: row.head,
  seq: row.seq,
  title: row.title,
  status: row.status,
  resolution: row.resolution,
  claimant: row.claimant,
  workers: [...row.workers],
  fields: {},
  reviews: {}
})

export interface VerifyReport {
  readonly ok: boolean
  readonly work_items: number
  readonly events: number
  readonly first_break: (ChainBreak & { readonly user_id: string; readonly work_id: string }) | null
}

const SERVER = "server"

/** `commit`'s expected head for the server's own observations: whatever the head is when it reads it. */
const CURRENT: unique symbol = Symbol("sophia/Ledger/current-head")

/** Drafts `commit` puts ahead of an append's, decided on the head row it read (and the fields they touch). */
interface Lead {
  readonly fields: ReadonlyArray<string>
  readonly drafts: (row: WorkRow) => Effect.Effect<ReadonlyArray<Draft>>
}

/**
 * The ledger: per-user work items, each an append-only hash chain of typed events with one head moved
 * only by compare-and-swap; evidence classes that never downgrade; reviews with separation of duties.
 * Owns `ledger_work`, `ledger_events`, `ledger_fields`, `ledger_reviews`. What the server witnessed
 * elsewhere reaches it as domain events (`observePost`, `observeRevocation`, `observeWait`), wired where
 * the layers are composed.
 */
export class Ledger extends Effect.Service<Ledger>()("sophia/Ledger", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const events = yield* Events
    const fixed = yield* makeFixedStatements
    const { named } = yield* makeStatements
    const silentAfterS = yield* Effect.orDie(silentAfterSConfig)

    const selectWork = fixed((userId: string, workId: string) =>
      sql`SELECT head, seq, title, status, resolution, claimant, workers FROM ledger_work
        WHERE user_id = ${userId} AND work_id = ${workId}`)
    const decodeWork = Schema.decodeUnknown(Schema.Array(WorkRow))
    const loadWork = (userId: string, workId: string) =>
      Effect.map(Effect.flatMap(selectWork(userId, workId), decodeWork), (rows): WorkRow | undefined => rows[0])

    // the append's fixed statements (see Statements.ts)
    const moveHead = fixed((
      head: string,
      seq: number,
      title: string,
      status: string,
      resolution: string | null,
      claimant: string | null,
      workers: string,
      at: string,
      userId: string,
      workId: string,
      expected: string | null
    ) =>
      sql`UPDATE ledger_work SET head = ${head}, seq = ${seq}, title = ${title}, status = ${status},
          resolution = ${resolution}, claimant = ${claimant}, workers = ${workers}, updated_at = ${at}
        WHERE user_id = ${userId} AND work_id = ${workId} AND head = ${expected} RETURNING seq`)
    const createHead = fixed((
      userId: string,
      workId: string,
      head: string,
      seq: number,
      title: string,
      status: string,
      resolution: string | null,
      claimant: string | null,
      workers: string,
      createdAt: string,
      updatedAt: string
    ) =>
      sql`INSERT INTO ledger_work (user_id, work_id, head, seq, title, status, resolution, claimant, workers,
          created_at, updated_at)
        VALUES (${userId}, ${workId}, ${head}, ${seq}, ${title}, ${status}, ${resolution}, ${claimant}, ${workers},
          ${createdAt}, ${updatedAt})
        ON CONFLICT (user_id, work_id) DO NOTHING RETURNING seq`)
    const insertEvent = fixed((
      userId: string,
      workId: string,
      seq: number,
      parent: string | null,
      type: string,
      data: string,
      evidence: string,
      actor: string,
      at: string,
      hash: string
    ) =>
      sql`INSERT INTO ledger_events (user_id, work_id, seq, parent, type, data, evidence, actor, at, hash)
        VALUES (${userId}, ${workId}, ${seq}, ${parent}, ${type}, ${data}, ${evidence}, ${actor}, ${at}, ${hash})`)
    const upsertField = fixed((
      userId: string,
      workId: string,
      field: string,
      value: string,
      evidence: string,
      setBy: string,
      at: string,
      seq: number
    ) =>
      sql`INSERT INTO ledger_fields (user_id, work_id, field, value, evidence, set_by, at, seq)
        VALUES (${userId}, ${workId}, ${field}, ${value}, ${evidence}, ${setBy}, ${at}, ${seq})
        ON CONFLICT (user_id, work_id, field) DO UPDATE SET value = excluded.value, evidence = excluded.evidence,
          set_by = excluded.set_by, at = excluded.at, seq = excluded.seq`)

    const upsertReview = fixed((
      requestId: string,
      userId: string,
      workId: string,
      uri: string,
      sha256: string,
      reviewer: string | null,
      requestedBy: string,
      requestedSeq: number,
      status: string,
      verdictBy: string | null,
      verdictSeq: number | null
    ) =>
      sql`INSERT INTO ledger_reviews (request_id, user_id, work_id, artifact_uri, artifact_sha256, reviewer,
          requested_by, requested_seq, status, verdict_by, verdict_seq)
        VALUES (${requestId}, ${userId}, ${workId}, ${uri}, ${sha256}, ${reviewer}, ${requestedBy},
          ${requestedSeq}, ${status}, ${verdictBy}, ${verdictSeq})
        ON CONFLICT (request_id) DO UPDATE SET status = excluded.status, verdict_by = excluded.verdict_by,
          verdict_seq = excluded.verdict_seq`)

    const selectFields = fixed((userId: string, workId: string) =>
      sql`SELECT field, value, evidence, set_by, at, seq FROM ledger_fields WHERE user_id = ${userId} AND work_id = ${workId}`)
    const decodeFields = Schema.decodeUnknown(Schema.Array(FieldRow))
    const loadFields = (userId: string, workId: string) => Effect.flatMap(selectFields(userId, workId), decodeFields)

    const selectReviews = fixed((userId: string, workId: string) =>
      sql`SELECT * FROM ledger_reviews WHERE user_id = ${userId} AND work_id = ${workId}`)
    const decodeReviews = Schema.decodeUnknown(Schema.Array(ReviewRow))
    const loadReviews = (userId: string, workId: string, ids?: ReadonlyArray<string>) =>
      Effect.flatMap(
        ids === undefined
          ? selectReviews(userId, workId)
          : sql`SELECT * FROM ledger_reviews WHERE user_id = ${userId} AND work_id = ${workId} AND ${sql.in("request_id", ids)}`,
        decodeReviews
      )

    // The head row joined with the fields an append touches: one fixed statement per number of names
    // (the names come first in its parameters, as `sql.in` places them).
    const headWith = new Map<number, (...params: Array<string>) => Effect.Effect<ReadonlyArray<unknown>, SqlError>>()
    const decodeHeadWith = Schema.decodeUnknown(Schema.Array(WorkWithFieldRow))
    const headWithFields = (userId: string, workId: string, names: ReadonlyArray<string>) => {
      const n = names.length
      let select = headWith.get(n)
      if (select === undefined) {
        select = fixed((...params: Array<string>) =>
          sql`SELECT w.head, w.seq, w.title, w.status, w.resolution, w.claimant, w.workers, f.field AS f_field,
              f.value AS f_value, f.evidence AS f_evidence, f.set_by AS f_set_by, f.at AS f_at, f.seq AS f_seq
            FROM ledger_work w LEFT JOIN ledger_fields f
              ON f.user_id = w.user_id AND f.work_id = w.work_id AND ${sql.in("f.field", params.slice(0, n))}
            WHERE w.user_id = ${params[n]} AND w.work_id = ${params[n + 1]}`)
        headWith.set(n, select)
      }
      return Effect.flatMap(select(...names, userId, workId), decodeHeadWith)
    }

    const eventsBetween = (userId: string, workId: string, options: { readonly upTo?: number; readonly before?: number; readonly limit?: number; readonly newestFirst?: boolean }) =>
      sql`SELECT work_id, seq, parent, type, data, evidence, actor, at, hash FROM ledger_events
        WHERE user_id = ${userId} AND work_id = ${workId}
          AND seq <= ${options.upTo ?? Number.MAX_SAFE_INTEGER} AND seq < ${options.before ?? Number.MAX_SAFE_INTEGER}
        ORDER BY seq ${options.newestFirst === true ? sql.literal("DESC") : sql.literal("ASC")}
        ${options.limit === undefined ? sql`` : limitTo(sql, options.limit)}`.pipe(Effect.flatMap(decodeEvents))

    /** The materialized state of a work item, as the tables hold it. */
    const loadState = (userId: string, workId: string) =>
      Effect.gen(function*() {
        const row = yield* loadWork(userId, workId)
        if (!row) return undefined
        const state = workingOf(workId, row)
        for (const f of yield* loadFields(userId, workId)) state.fields[f.field] = fieldOf(f)
        for (const r of yield* loadReviews(userId, workId)) state.reviews[r.request_id] = reviewOf(r)
        return settle(state)
      })

    // The state in hand at the last head this process wrote on each work item (see `commit`), with the
    // names of the fields and reviews it knows (present, or known to be absent). Bounded: the least
    // recently moved items go first.
    interface InHand {
      readonly head: string
      readonly state: Working
      readonly fields: ReadonlySet<string>
      readonly reviews: ReadonlySet<string>
    }
    const IN_HAND_MAX = 4096
    const isSubset = (a: ReadonlySet<string>, b: ReadonlySet<string>) => {
      for (const x of a) if (!b.has(x)) return false
      return true
    }
    const hands = new Map<string, InHand>()
    const handKey = (userId: string, workId: string) => `${userId}\u0000${workId}`
    /** A copy of the state at `expected`, when in hand with everything the drafts touch known. */
    const inHand = (
      userId: string,
      workId: string,
      expected: string,
      names: ReadonlySet<string>,
      ids: ReadonlySet<string>
    ): { readonly head: string; readonly state: Working; readonly known: InHand } | undefined => {
      const known = hands.get(handKey(userId, workId))
      if (known === undefined || known.head !== expected) return undefined
      if (!isSubset(names, known.fields) || !isSubset(ids, known.reviews)) return undefined
      // `applyEvent` works in place: fold onto a copy (fields and reviews are replaced, never mutated)
      const s = known.state
      return {
        head: expected,
        state: { ...s, workers: [...s.workers], fields: { ...s.fields }, reviews: { ...s.reviews } },
        known
      }
    }
    const keepInHand = (
      userId: string,
      workId: string,
      state: Working,
      names: ReadonlySet<string>,
      touchedFields: ReadonlySet<string>,
      ids: ReadonlySet<string>,
      touchedReviews: ReadonlySet<string>,
      from: { readonly known: InHand } | undefined
    ) => {
      const key = handKey(userId, workId)
      // the known names grow only: the sets in hand are shared (never changed) while nothing is new
      const union = (known: ReadonlySet<string> | undefined, ...more: Array<ReadonlySet<string>>): ReadonlySet<string> => {
        if (known !== undefined && more.every((m) => isSubset(m, known))) return known
        const all = new Set(known)
        for (const m of more) for (const n of m) all.add(n)
        return all
      }
      const fields = union(from?.known.fields, names, touchedFields)
      const reviews = union(from?.known.reviews, ids, touchedReviews)
      hands.delete(key)
      if (hands.size >= IN_HAND_MAX) hands.delete(hands.keys().next().value!)
      hands.set(key, { head: state.head, state, fields, reviews })
    }

    /**
     * The one write path: inside one transaction, take the state at the expected head (in hand, or read
     * once from the head row with the fields the drafts touch), fold the drafts onto it, move the head by
     * one conditional UPDATE (zero rows = refused: the compare-and-swap, which holds on Postgres too,
     * where another writer may move the head between a read and the UPDATE), insert the events and the
     * changed fields and reviews, and publish `LedgerAppended`. All or nothing. `expected` is `CURRENT`
     * for the server's own observations (whatever the head is; no head row is `NotFound`). `lead`, when
     * given, adds drafts ahead of `drafts` from the head row read (a claim takeover), with their fields.
     *
     * The state in hand: the state at a head is a pure function of the chain that ends there (the fold
     * of its events; `verify` proves the tables hold exactly that), so the state this process computed
     * when it wrote a head, or read at it, is the state at that head for good. When the expected head is
     * one in hand (with every field and review the drafts touch known), the append needs no read: the
     * compare-and-swap on that head decides, here or in any other process on the same database. A
     * refusal the fold finds on a state in hand is returned only once a read confirmed the head (a moved
     * head is refused as such first, as when the head is read).
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
        // the fields and reviews this append touches: loaded with the head row, nothing else
        const names = new Set<string>(lead?.fields)
        const ids = new Set<string>()
        for (const d of drafts) {
          if (d.type === "asserted" || d.type === "observed") names.add((d.data as { field: string }).field)
          if (d.type === "review_verdict") {
            names.add(REVIEW_FIELD)
            ids.add((d.data as { request_id: string }).request_id)
          }
        }
        const hand = typeof expected === "string" && lead === undefined ? inHand(userId, workId, expected, names, ids) : undefined
        let head: string | null
        let state: Working | null
        let all = drafts
        if (hand !== undefined) {
          head = hand.head
          state = hand.state
        } else {
          const joined = names.size === 0 ? undefined : yield* headWithFields(userId, workId, [...names])
          const row: WorkRow | undefined = joined === undefined ? yield* loadWork(userId, workId) : joined[0]
          if (expected === CURRENT) {
            if (!row) return yield* new NotFound({ what: "work item", id: workId })
          } else if (expected === null) {
            if (row) return yield* new HeadMoved({ work_id: workId, expected, actual: row.head })
          } else if (!row || row.head !== expected) {
            return yield* new HeadMoved({ work_id: workId, expected, actual: row?.head ?? null })
          }
          head = row?.head ?? null
          state = row ? workingOf(workId, row) : null
          if (state) {
            for (const j of joined ?? []) {
              if (j.f_field !== null) {
                state.fields[j.f_field] = {
                  value: JSON.parse(j.f_value!),
                  evidence: j.f_evidence!,
                  set_by: j.f_set_by!,
                  at: j.f_at!,
                  seq: j.f_seq!
                }
              }
            }
            if (ids.size > 0) {
              for (const r of yield* loadReviews(userId, workId, [...ids])) state.reviews[r.request_id] = reviewOf(r)
            }
          }
          if (lead !== undefined && row) all = [...(yield* lead.drafts(row)), ...drafts]
        }
        const at = yield* nowIso
        let parent = head
        let seq = state ? state.seq : 0
        const appended: Array<LedgerEvent> = []
        const dataJcs: Array<string> = []
        const touchedFields = new Set<string>()
        const touchedReviews = new Set<string>()
        for (const d of all) {
          seq += 1
          const body = { work_id: workId, seq, parent, type: d.type, data: d.data, evidence: d.evidence, actor: d.actor, at } as Omit<LedgerEvent, "hash">
          const hashed = hashAndData(body)
          const event = { ...body, hash: hashed.hash } as LedgerEvent
          const applied = applyEvent(state, event)
          if ("refusal" in applied) {
            if (hand !== undefined) {
              const now = yield* loadWork(userId, workId)
              if (now?.head !== head) return yield* new HeadMoved({ work_id: workId, expected: head, actual: now?.head ?? null })
            }
            return yield* applied.refusal
          }
          state = applied.state
          appended.push(event)
          dataJcs.push(hashed.data)
          parent = event.hash
          if (event.type === "asserted" || event.type === "observed") touchedFields.add(event.data.field)
          if (event.type === "review_requested" || event.type === "review_verdict") touchedReviews.add(event.data.request_id)
          if (event.type === "review_verdict" && event.data.verdict === "approved") touchedFields.add(REVIEW_FIELD)
        }
        const s = state!
        const workers = JSON.stringify(s.workers)
        // compare-and-swap on the head: exactly one writer extends a given head
        const moved = head !== null
          ? yield* moveHead(s.head, s.seq, s.title, s.status, s.resolution, s.claimant, workers, at, userId, workId, head)
          : yield* createHead(userId, workId, s.head, s.seq, s.title, s.status, s.resolution, s.claimant, workers, at, at)
        if (moved.length === 0) {
          const now = yield* loadWork(userId, workId)
          return yield* new HeadMoved({ work_id: workId, expected: head, actual: now?.head ?? null })
        }
        for (let i = 0; i < appended.length; i++) {
          const e = appended[i]
          yield* insertEvent(userId, workId, e.seq, e.parent, e.type, dataJcs[i], e.evidence, e.actor, e.at, e.hash)
        }
        for (const name of touchedFields) {
          const f = s.fields[name]
          yield* upsertField(userId, workId, name, jcs(f.value), f.evidence, f.set_by, f.at, f.seq)
        }
        for (const id of touchedReviews) {
          const r = s.reviews[id]
          yield* upsertReview(id, userId, workId, r.artifact.uri, r.artifact.sha256, r.reviewer, r.requested_by, r.requested_seq, r.status, r.verdict_by, r.verdict_seq)
        }
        keepInHand(userId, workId, s, names, touchedFields, ids, touchedReviews, hand)
        // our own values, already of the event's shape: constructed without re-validating them
        yield* events.publish(
          new LedgerAppended({ user_id: userId, work_id: workId, head: s.head, seq: s.seq, types: appended.map((e) => e.type) }, true)
        )
        return { work_id: workId, head: s.head, seq: s.seq } satisfies AppendResult
      }).pipe(events.transaction)

    /**
     * `sophia.ledger_append`: an agent's events, all `asserted`, all or none. The limits (count, value
     * size) are the input Schema's; the rule below is the ledger's own.
     */
    const append = spanned("Ledger.append", Effect.fnUntraced(function*(caller: Caller, input: LedgerAppendInput) {
      // `review` is the verdict's field: an agent's own "approved" must not sit there, even as `asserted`
      if (input.events.some((e) => e.type === "asserted" && e.field === REVIEW_FIELD)) {
        return yield* new ValidationError({
          detail: "the field review is written only by sophia.review_verdict; request a review instead"
        })
      }
      const drafts = input.events.map((e) => draftOf(e, caller.connectionId))
      if (input.expected_head === null || !drafts.some((d) => d.type === "claimed")) {
        return yield* commit(caller.userId, input.work_id, input.expected_head, drafts)
      }
      // a claim on an item another connection holds: allowed exactly when that claimant is gone (revoked,
      // or silent), and then recorded first as the server's observation of the takeover (decided on the
      // head row the append reads, inside its transaction)
      return yield* commit(caller.userId, input.work_id, input.expected_head, drafts, {
        fields: [CLAIM_TAKEOVER_FIELD],
        drafts: (row) =>
          Effect.gen(function*() {
            const previous = row.claimant
            if (previous === null || previous === caller.connectionId) return []
            const takeover = orphanOf(Option.getOrUndefined(yield* auth.get(previous)), yield* Clock.currentTimeMillis, silentAfterS)
            if (takeover === undefined) return []
            return [{
              type: "observed",
              data: {
                field: CLAIM_TAKEOVER_FIELD,
                value: { previous_claimant: previous, reason: takeover.reason, since: takeover.since, by: caller.connectionId },
                source: `claimant ${previous} ${takeover.reason}`
              },
              evidence: "observed",
              actor: SERVER
            }] satisfies ReadonlyArray<Draft>
          })
      })
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /**
     * What the server witnessed itself (a wait resolved, a closeout on the item's channel, a claimant's
     * connection revoked…), recorded as `observed` on the current head. For other services, never agents.
     */
    const observe = spanned("Ledger.observe", Effect.fnUntraced(function*(
      userId: string,
      workId: string,
      field: string,
      value: unknown,
      source: string
    ) {
      const issue = ledgerValueIssue(value)
      if (issue !== undefined) return yield* new ValidationError({ detail: issue })
      return yield* commit(userId, workId, CURRENT, [{
        type: "observed",
        data: { field, value: value === undefined ? null : value, source },
        evidence: "observed",
        actor: SERVER
      }])
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    /** `sophia.review_request`: mint a durable request id for an exact artifact. */
    const requestReview = spanned("Ledger.requestReview", Effect.fnUntraced(function*(caller: Caller, input: ReviewRequestInput) {
      const reviewer = input.reviewer === undefined
        ? null
        : (yield* auth.resolve(caller.userId, input.reviewer)).connection_id
      const request_id = `rev_${randomUUID()}`
      const result = yield* commit(caller.userId, input.work_id, input.expected_head, [{
        type: "review_requested",
        data: { request_id, artifact: { uri: input.artifact.uri, sha256: input.artifact.sha256 }, reviewer },
        evidence: "asserted",
        actor: caller.connectionId
      }])
      return { request_id, ...result }
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    const findReview = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, requestId: Schema.String }),
      Result: Schema.Struct({ work_id: Schema.String }),
      execute: ({ requestId, userId }) =>
        sql`SELECT work_id FROM ledger_reviews WHERE request_id = ${requestId} AND user_id = ${userId}`
    })

    /** `sophia.review_verdict`: the answer to one request, by a connection that did not do the work. */
    const giveVerdict = spanned("Ledger.giveVerdict", Effect.fnUntraced(function*(caller: Caller, input: ReviewVerdictInput) {
      const found = yield* findReview({ userId: caller.userId, requestId: input.request_id })
      if (Option.isNone(found)) return yield* new InvalidTransition({ detail: `no review request ${input.request_id}` })
      return yield* commit(caller.userId, found.value.work_id, input.expected_head, [{
        type: "review_verdict",
        data: {
          request_id: input.request_id,
          verdict: input.verdict,
          artifact_sha256: input.artifact_sha256,
          notes: input.notes ?? null
        },
        evidence: input.verdict === "approved" ? "verified" : "asserted",
        actor: caller.connectionId
      }])
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    const mustState = (userId: string, workId: string) =>
      Effect.flatMap(loadState(userId, workId), (s) => s ? Effect.succeed(s) : Effect.fail(new NotFound({ what: "work item", id: workId })))

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
      const row = yield* loadWork(caller.userId, input.work_id)
      if (!row) return yield* new NotFound({ what: "work item", id: input.work_id })
      const limit = Math.min(Math.max(input.limit ?? 50, 1), 200)
      const rows = yield* eventsBetween(caller.userId, input.work_id, {
        ...(input.before_seq !== undefined ? { before: input.before_seq } : {}),
        limit: limit + 1,
        newestFirst: true
      })
      const page = rows.slice(0, limit)
      const result: LedgerLog = {
        work_id: input.work_id,
        head: row.head,
        events: page,
        next_before_seq: rows.length > limit ? page[page.length - 1].seq : null
      }
      return result
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    const findSeqOfHash = SqlSchema.findOne({
      Request: Schema.Struct({ userId: Schema.String, workId: Schema.String, hash: Schema.String }),
      Result: Schema.Struct({ seq: DbInt }),
      execute: ({ hash, userId, workId }) =>
        sql`SELECT seq FROM ledger_events WHERE user_id = ${userId} AND work_id = ${workId} AND hash = ${hash}`
    })

    /** Field changes (value and evidence, before and after) between two heads of one work item. */
    const diff = spanned("Ledger.diff", Effect.fnUntraced(function*(caller: Caller, input: LedgerDiffInput) {
      const row = yield* loadWork(caller.userId, input.work_id)
      if (!row) return yield* new NotFound({ what: "work item", id: input.work_id })
      const seqOf = (hash: string) =>
        Effect.flatMap(
          findSeqOfHash({ userId: caller.userId, workId: input.work_id, hash }),
          Option.match({
            onNone: () => Effect.fail(new NotFound({ what: "head", id: hash })),
            onSome: (r) => Effect.succeed(r.seq)
          })
        )
      const fromSeq = yield* seqOf(input.from)
      const toHead = input.to ?? row.head
      const toSeq = yield* seqOf(toHead)
      if (fromSeq > toSeq) {
        return yield* new ValidationError({ detail: `from (seq ${fromSeq}) is later than to (seq ${toSeq}); swap them` })
      }
      const chain = yield* eventsBetween(caller.userId, input.work_id, { upTo: toSeq })
      const before = replay(chain.slice(0, fromSeq)).state!
      const beforeFields = { ...before.fields }
      const beforeStatus = { status: before.status, claimant: before.claimant }
      let after: Working = before
      for (const e of chain.slice(fromSeq)) {
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

    const listItems = SqlSchema.findAll({
      Request: Schema.NullOr(Schema.String),
      Result: Schema.Struct({ user_id: Schema.String, work_id: Schema.String }),
      execute: (userId) =>
        userId === null
          ? sql`SELECT user_id, work_id FROM ledger_work
              UNION SELECT DISTINCT user_id, work_id FROM ledger_events ORDER BY user_id, work_id`
          : sql`SELECT user_id, work_id FROM ledger_work WHERE user_id = ${userId}
              UNION SELECT DISTINCT user_id, work_id FROM ledger_events WHERE user_id = ${userId}
              ORDER BY user_id, work_id`
    })
    const RawEvents = Schema.Array(EventRow)

    /**
     * One item checked the exact way: every row through the contract's Schema, `replay`, the tables.
     * Says what the break is, and where; `count` is the events counted so far, this item's included.
     */
    const verifyExactly = (item: { readonly user_id: string; readonly work_id: string }, items: number, counted: number) =>
      Effect.gen(function*() {
        const rows = yield* sql`SELECT work_id, seq, parent, type, data, evidence, actor, at, hash FROM ledger_events
          WHERE user_id = ${item.user_id} AND work_id = ${item.work_id} ORDER BY seq`
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
        const decoded = Schema.decodeUnknownEither(Schema.Array(EventFromRow))(rows)
        if (decoded._tag === "Left") return at({ seq: 0, reason: "an event is not in the ledger contract's vocabulary" })
        // a stored event canonical JSON cannot hold (an older build took values nested thousands deep) is a
        // break at that event, reported like any other: verify itself never dies of it
        let replayed: ReturnType<typeof replay>
        try {
          replayed = replay(decoded.right)
        } catch (error) {
          const hashable = (e: LedgerEvent) => {
            try {
              return eventHash(e).length > 0
            } catch {
              return false
            }
          }
          const bad = decoded.right.find((e) => !hashable(e))
          return at({ seq: bad?.seq ?? 0, reason: `event cannot be hashed: ${String((error as Error)?.message ?? error)}` })
        }
        if (replayed.break) return at(replayed.break)
        const stored = yield* loadState(item.user_id, item.work_id)
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

    const VERIFY_PAGE = 4096
    // rows as arrays (`StoredEventValues`), in the order of STORED_EVENT_COLUMNS
    const eventPage = fixed.values((userId: string, workId: string, after: number) =>
      sql`SELECT ${sql.literal(STORED_EVENT_COLUMNS)} FROM ledger_events
        WHERE user_id = ${userId} AND work_id = ${workId} AND seq > ${after} ORDER BY seq ${limitTo(sql, VERIFY_PAGE)}`)

    /**
     * One item checked the fast way: its rows in pages, each read and hashed by plain functions
     * (`replayStored`), then the tables compared. The number of events when the item is clean; undefined
     * at anything else, for `verifyExactly` to say what it is.
     */
    const verifyClean = (item: { readonly user_id: string; readonly work_id: string }) =>
      Effect.gen(function*() {
        let cursor = REPLAY_START
        let count = 0
        for (;;) {
          const rows = yield* eventPage(item.user_id, item.work_id, cursor.seq)
          count += rows.length
          const next = replayStored(rows as ReadonlyArray<StoredEventValues>, cursor)
          if (next === undefined) return undefined
          cursor = next
          if (rows.length < VERIFY_PAGE) break
        }
        const replayed = cursor.state
        if (replayed === null) return undefined
        const stored = yield* loadState(item.user_id, item.work_id)
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
    const verify = Effect.fn("Ledger.verify")(function*(options: { readonly userId?: string | undefined } = {}) {
      const items = yield* listItems(options.userId ?? null)
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
    }, Effect.orDie)

    /** Every event of one work item, oldest first (for replay and tests). */
    const history = Effect.fn("Ledger.events")(function*(userId: string, workId: string) {
      return yield* eventsBetween(userId, workId, {})
    }, Effect.orDie)

    /** The materialized settled state (from the tables), or none. */
    const state = Effect.fn("Ledger.state")(function*(userId: string, workId: string) {
      return yield* loadState(userId, workId)
    }, Effect.orDie)

    const countItems = fixed((userId: string) => sql`SELECT COUNT(*) AS n FROM ledger_work WHERE user_id = ${userId}`)
    /** How many work items the user has. */
    const countWork = (userId: string) =>
      countItems(userId).pipe(Effect.flatMap(decodeCount), Effect.map(([r]) => r.n), Effect.orDie)

    const claimedRows = fixed((userId: string, connectionId: string) =>
      sql`SELECT work_id, title, status, head, seq FROM ledger_work
        WHERE user_id = ${userId} AND claimant = ${connectionId} AND status <> 'closed'
        ORDER BY updated_at DESC, work_id LIMIT 50`)
    const decodeClaimed = Schema.decodeUnknown(Schema.Array(Schema.Struct({
      work_id: Schema.String,
      title: Schema.String,
      status: Schema.String,
      head: Schema.String,
      seq: DbInt
    })))
    /** The open work items a connection holds the claim on (newest first, at most 50). */
    const claimedBy = (userId: string, connectionId: string): Effect.Effect<ReadonlyArray<WorkSummary>> =>
      claimedRows(userId, connectionId).pipe(Effect.flatMap(decodeClaimed), Effect.orDie)

    // every claimant's newest 50, as `claimedRows` reads them for one (ties in updated_at broken by work_id in both)
    const claimedByAll = named("Ledger.claimedByConnections", (p: { userId: string }) =>
      sql`SELECT claimant, work_id, title, status, head, seq FROM (
          SELECT claimant, work_id, title, status, head, seq, updated_at,
            ROW_NUMBER() OVER (PARTITION BY claimant ORDER BY updated_at DESC, work_id) AS nth
          FROM ledger_work WHERE user_id = ${p.userId} AND claimant IS NOT NULL AND status <> 'closed') c
        WHERE nth <= 50 ORDER BY claimant, updated_at DESC, work_id`)
    const decodeClaimedByAll = Schema.decodeUnknown(Schema.Array(Schema.Struct({
      claimant: Schema.String,
      work_id: Schema.String,
      title: Schema.String,
      status: Schema.String,
      head: Schema.String,
      seq: DbInt
    })))
    /** Every open item a connection of the user holds the claim on, by claimant: `claimedBy` of each, in one statement. */
    const claimedByConnections = spanned("Ledger.claimedByConnections", Effect.fnUntraced(function*(userId: string) {
      const rows = yield* Effect.flatMap(claimedByAll({ userId }), decodeClaimedByAll)
      const byClaimant = new Map<string, Array<WorkSummary>>()
      for (const { claimant, ...item } of rows) {
        const items = byClaimant.get(claimant)
        if (items === undefined) byClaimant.set(claimant, [item])
        else items.push(item)
      }
      return byClaimant as ReadonlyMap<string, ReadonlyArray<WorkSummary>>
    }, Effect.catchTag("SqlError", "ParseError", Effect.die)))

    const listRows = SqlSchema.findAll({
      Request: Schema.Struct({ userId: Schema.String, limit: Schema.Number }),
      Result: Schema.Struct({
        work_id: Schema.String,
        title: Schema.String,
        status: Schema.String,
        claimant: Schema.NullOr(Schema.String),
        head: Schema.String,
        seq: DbInt,
        updated_at: Schema.String
      }),
      execute: ({ limit, userId }) =>
        sql`SELECT work_id, title, status, claimant, head, seq, updated_at FROM ledger_work
          WHERE user_id = ${userId} ORDER BY updated_at DESC, work_id ${limitTo(sql, limit)}`
    })
    /** The user's work items, most recently moved first (the owner's dashboard), at most `limit` (≤ 1000). */
    const listWork = (userId: string, limit = 200) =>
      Effect.orDie(listRows({ userId, limit: Math.min(Math.max(1, Math.trunc(limit)), 1000) }))
    const claimRows = SqlSchema.findAll({
      Request: Schema.String,
      Result: Schema.Struct({ work_id: Schema.String, title: Schema.String, claimant: Schema.String }),
      execute: (userId) =>
        sql`SELECT work_id, title, claimant FROM ledger_work
          WHERE user_id = ${userId} AND claimant IS NOT NULL AND status <> 'closed'
          ORDER BY work_id`
    })
    /** The user's open work items whose claimant is revoked or silent: the claims half of the orphans. */
    const orphanedWork = (userId: string): Effect.Effect<ReadonlyArray<OrphanedWork>> =>
      Effect.gen(function*() {
        const rows = yield* claimRows(userId)
        if (rows.length === 0) return []
        const connections = yield* auth.connections(rows.map((r) => r.claimant))
        const now = yield* Clock.currentTimeMillis
        return rows.flatMap((r): Array<OrphanedWork> => {
          const gone = orphanOf(connections.get(r.claimant), now, silentAfterS)
          return gone === undefined ? [] : [{ work_id: r.work_id, title: r.title, connection_id: r.claimant, ...gone }]
        })
      }).pipe(Effect.orDie)

    /**
     * What the server witnessed itself becomes `observed` evidence on the work item it concerns, inside
     * the transaction that witnessed it. Nothing to observe (no such item) is not an error.
     */
    const witness = (userId: string, workId: string, field: string, value: unknown, source: string) =>
      observe(userId, workId, field, value, source).pipe(Effect.asVoid, Effect.catchTag("NotFound", () => Effect.void))

    /** Which posts and waits concern a work item (the rest never reach the observers). */
    const observesPost = (post: PostLanded) => post.kind === "closeout" && arcWorkId(post.channel) !== undefined
    const observesWait = (resolved: WaitResolved) => arcWorkId(resolved.channel) !== undefined

    /** `PostLanded`: a closeout on the item's `arc:<work_id>` channel. */
    const observePost = (post: PostLanded) => {
      const workId = post.kind === "closeout" ? arcWorkId(post.channel) : undefined
      return workId === undefined ? Effect.void : witness(post.user_id, workId, "closeout", {
        post_id: post.post_id,
        by: post.author,
        channel_archived: post.archived
      }, `post ${post.post_id}`)
    }

    /** `ConnectionRevoked`: every open item the revoked connection held the claim on. */
    const observeRevocation = (revoked: ConnectionRevoked) =>
      Effect.gen(function*() {
        const items = yield* claimedRows(revoked.user_id, revoked.connection_id).pipe(Effect.flatMap(decodeClaimed))
        for (const item of items) {
          yield* witness(revoked.user_id, item.work_id, "claimant_revoked", {
            connection_id: revoked.connection_id,
            at: revoked.at
          }, `connection ${revoked.connection_id} revoked`)
        }
      })

    /** `WaitResolved`: a wait on the item's `arc:<work_id>` channel resolved. */
    const observeWait = (resolved: WaitResolved) => {
      const workId = arcWorkId(resolved.channel)
      return workId === undefined ? Effect.void : witness(resolved.user_id, workId, "wait", {
        wait_id: resolved.wait_id,
        resolution: resolved.resolution,
        waiter: resolved.waiter,
        resolved_by: resolved.resolved_by
      }, `wait ${resolved.wait_id}`)
    }

    return {
      append,
      observe,
      requestReview,
      giveVerdict,
      status,
      log,
      diff,
      verify,
      events: history,
      state,
      countWork,
      claimedBy,
      claimedByConnections,
      listWork,
      orphanedWork,
      observesPost,
      observePost,
      observesWait,
      observeRevocation,
      observeWait
    } as const
  })
}) {}
