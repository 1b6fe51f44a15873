import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Working } from "../../domain/LedgerCore.js"
import { settle } from "../../domain/LedgerCore.js"
import { makeStatements } from "../store/Statements.js"
import { FieldRow, fieldOf, ReviewRow, reviewOf, WorkRow, WorkWithFieldRow, workingOf } from "./Rows.js"

/**
 * Most values a shaped statement of the ledger binds through its compiled text (the names an append
 * touches: up to `MAX_EVENTS_PER_APPEND` events and a claim takeover, with the user and the item).
 */
const SHAPED_MAX = 256

/** A head row as the append writes it: the scalar part of the settled state at `head`. */
export type HeadParams = {
  readonly userId: string
  readonly workId: string
  readonly head: string
  readonly seq: number
  readonly title: string
  readonly status: string
  readonly resolution: string | null
  readonly claimant: string | null
  /** JSON array of connection ids */
  readonly workers: string
  readonly at: string
}

/**
 * The ledger's store: the work items' head rows, settled fields and reviews (`ledger_work`,
 * `ledger_fields`, `ledger_reviews`) and the append's writes (with `ledger_events`' insert), each a named
 * statement, and the read that assembles them into a settled state. A module of the Ledger service: it
 * returns effects, and only the Ledger's own modules call them. The chain's reads are Chain.ts; the
 * work lists', Lists.ts.
 */
export const makeLedgerStore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, shaped } = yield* makeStatements

  // ---- the head row ------------------------------------------------------------------------------
  const selectWork = named("Ledger.work", (p: { userId: string; workId: string }) =>
    sql`SELECT head, seq, title, status, resolution, claimant, workers FROM ledger_work
      WHERE user_id = ${p.userId} AND work_id = ${p.workId}`)
  const decodeWork = Schema.decodeUnknown(Schema.Array(WorkRow))
  const loadWork = (userId: string, workId: string) =>
    Effect.map(Effect.flatMap(selectWork({ userId, workId }), decodeWork), (rows): WorkRow | undefined => rows[0])

  // The head row joined with the fields an append touches: one compiled text per number of names.
  const selectHeadWithFields = shaped("Ledger.headWithFields", SHAPED_MAX, (p: {
    names: ReadonlyArray<string>
    userId: string
    workId: string
  }) =>
    sql`SELECT w.head, w.seq, w.title, w.status, w.resolution, w.claimant, w.workers, f.field AS f_field,
        f.value AS f_value, f.evidence AS f_evidence, f.set_by AS f_set_by, f.at AS f_at, f.seq AS f_seq
      FROM ledger_work w LEFT JOIN ledger_fields f
        ON f.user_id = w.user_id AND f.work_id = w.work_id AND ${sql.in("f.field", p.names)}
      WHERE w.user_id = ${p.userId} AND w.work_id = ${p.workId}`)
  const decodeHeadWith = Schema.decodeUnknown(Schema.Array(WorkWithFieldRow))
  /** The head row once per field among `names` it has (one row with null field columns when it has none). */
  const headWithFields = (userId: string, workId: string, names: ReadonlyArray<string>) =>
    Effect.flatMap(selectHeadWithFields({ names, userId, workId }), decodeHeadWith)

  // ---- the append's writes -----------------------------------------------------------------------
  /** Move the head from `expected` (the compare-and-swap: no row when the head is not `expected`). */
  const moveHead = named("Ledger.moveHead", (p: HeadParams & { expected: string }) =>
    sql`UPDATE ledger_work SET head = ${p.head}, seq = ${p.seq}, title = ${p.title}, status = ${p.status},
        resolution = ${p.resolution}, claimant = ${p.claimant}, workers = ${p.workers}, updated_at = ${p.at}
      WHERE user_id = ${p.userId} AND work_id = ${p.workId} AND head = ${p.expected} RETURNING seq`)
  /** Create the head row (no row when the item already exists). */
  const createHead = named("Ledger.createHead", (p: HeadParams) =>
    sql`INSERT INTO ledger_work (user_id, work_id, head, seq, title, status, resolution, claimant, workers,
        created_at, updated_at)
      VALUES (${p.userId}, ${p.workId}, ${p.head}, ${p.seq}, ${p.title}, ${p.status}, ${p.resolution}, ${p.claimant},
        ${p.workers}, ${p.at}, ${p.at})
      ON CONFLICT (user_id, work_id) DO NOTHING RETURNING seq`)
  const insertEvent = named("Ledger.insertEvent", (p: {
    userId: string
    workId: string
    seq: number
    parent: string | null
    type: string
    data: string
    evidence: string
    actor: string
    at: string
    hash: string
  }) =>
    sql`INSERT INTO ledger_events (user_id, work_id, seq, parent, type, data, evidence, actor, at, hash)
      VALUES (${p.userId}, ${p.workId}, ${p.seq}, ${p.parent}, ${p.type}, ${p.data}, ${p.evidence}, ${p.actor}, ${p.at},
        ${p.hash})`)
  const upsertField = named("Ledger.upsertField", (p: {
    userId: string
    workId: string
    field: string
    value: string
    evidence: string
    setBy: string
    at: string
    seq: number
  }) =>
    sql`INSERT INTO ledger_fields (user_id, work_id, field, value, evidence, set_by, at, seq)
      VALUES (${p.userId}, ${p.workId}, ${p.field}, ${p.value}, ${p.evidence}, ${p.setBy}, ${p.at}, ${p.seq})
      ON CONFLICT (user_id, work_id, field) DO UPDATE SET value = excluded.value, evidence = excluded.evidence,
        set_by = excluded.set_by, at = excluded.at, seq = excluded.seq`)
  const upsertReview = named("Ledger.upsertReview", (p: {
    requestId: string
    userId: string
    workId: string
    uri: string
    sha256: string
    reviewer: string | null
    requestedBy: string
    requestedSeq: number
    status: string
    verdictBy: string | null
    verdictSeq: number | null
  }) =>
    sql`INSERT INTO ledger_reviews (request_id, user_id, work_id, artifact_uri, artifact_sha256, reviewer,
        requested_by, requested_seq, status, verdict_by, verdict_seq)
      VALUES (${p.requestId}, ${p.userId}, ${p.workId}, ${p.uri}, ${p.sha256}, ${p.reviewer}, ${p.requestedBy},
        ${p.requestedSeq}, ${p.status}, ${p.verdictBy}, ${p.verdictSeq})
      ON CONFLICT (request_id) DO UPDATE SET status = excluded.status, verdict_by = excluded.verdict_by,
        verdict_seq = excluded.verdict_seq`)

  // ---- fields, reviews and the whole state ---------------------------------------------------------
  const selectFields = named("Ledger.fields", (p: { userId: string; workId: string }) =>
    sql`SELECT field, value, evidence, set_by, at, seq FROM ledger_fields WHERE user_id = ${p.userId} AND work_id = ${p.workId}`)
  const decodeFields = Schema.decodeUnknown(Schema.Array(FieldRow))

  const selectReviews = named("Ledger.reviews", (p: { userId: string; workId: string }) =>
    sql`SELECT * FROM ledger_reviews WHERE user_id = ${p.userId} AND work_id = ${p.workId}`)
  const selectReviewsByIds = shaped("Ledger.reviewsByIds", SHAPED_MAX, (p: { userId: string; workId: string; ids: ReadonlyArray<string> }) =>
    sql`SELECT * FROM ledger_reviews WHERE user_id = ${p.userId} AND work_id = ${p.workId} AND ${sql.in("request_id", p.ids)}`)
  const decodeReviews = Schema.decodeUnknown(Schema.Array(ReviewRow))
  /** The item's reviews: every one, or those of `ids`. */
  const loadReviews = (userId: string, workId: string, ids?: ReadonlyArray<string>) =>
    Effect.flatMap(ids === undefined ? selectReviews({ userId, workId }) : selectReviewsByIds({ userId, workId, ids }), decodeReviews)

  /** The materialized state of a work item, as the tables hold it. */
  const loadState = (userId: string, workId: string) =>
    Effect.gen(function*() {
      const row = yield* loadWork(userId, workId)
      if (!row) return undefined
      const state: Working = workingOf(workId, row)
      for (const f of yield* Effect.flatMap(selectFields({ userId, workId }), decodeFields)) state.fields[f.field] = fieldOf(f)
      for (const r of yield* loadReviews(userId, workId)) state.reviews[r.request_id] = reviewOf(r)
      return settle(state)
    })

  const selectWorkOfReview = named("Ledger.workOfReview", (p: { userId: string; requestId: string }) =>
    sql`SELECT work_id FROM ledger_reviews WHERE request_id = ${p.requestId} AND user_id = ${p.userId}`)
  const decodeWorkIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ work_id: Schema.String })))
  /** The work item a review request of the user belongs to, if there is one. */
  const workOfReview = (userId: string, requestId: string) =>
    Effect.map(Effect.flatMap(selectWorkOfReview({ userId, requestId }), decodeWorkIds), (rows) => rows[0]?.work_id)

  return {
    loadWork,
    headWithFields,
    moveHead,
    createHead,
    insertEvent,
    upsertField,
    upsertReview,
    loadReviews,
    loadState,
    workOfReview
  } as const
})

/** The ledger's store, as its modules receive it. */
export type LedgerStore = Effect.Effect.Success<typeof makeLedgerStore>
