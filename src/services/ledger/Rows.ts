import { Schema } from "effect"
import type { ReviewState, SettledField } from "../../domain/Ledger.js"
import { Evidence, LedgerEvent, ReviewStatus } from "../../domain/Ledger.js"
import type { Working } from "../../domain/LedgerCore.js"
import { DbInt } from "../../domain/Time.js"

/**
 * The rows of the ledger's tables (`ledger_work`, `ledger_events`, `ledger_fields`, `ledger_reviews`) as
 * their statements return them, decoded through Schema (never cast), and what they become in the domain.
 */

/** A head row of `ledger_work`: the settled state's scalar part. */
export const WorkRow = Schema.Struct({
  head: Schema.String,
  seq: DbInt,
  title: Schema.String,
  status: Schema.Literal("open", "closed"),
  resolution: Schema.NullOr(Schema.String),
  claimant: Schema.NullOr(Schema.String),
  workers: Schema.parseJson(Schema.Array(Schema.String))
})
export type WorkRow = typeof WorkRow.Type

/** A stored event: its `data` column is the canonical JSON of the event's data. */
export const EventRow = Schema.Struct({
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
export const EventFromRow = Schema.compose(EventRow, LedgerEvent, { strict: false })

export const FieldRow = Schema.Struct({
  field: Schema.String,
  value: Schema.parseJson(),
  evidence: Evidence,
  set_by: Schema.String,
  at: Schema.String,
  seq: DbInt
})
export type FieldRow = typeof FieldRow.Type

/** The head row joined with the fields an append touches (null columns when it touches none that exist). */
export const WorkWithFieldRow = Schema.Struct({
  ...WorkRow.fields,
  f_field: Schema.NullOr(Schema.String),
  f_value: Schema.NullOr(Schema.String),
  f_evidence: Schema.NullOr(Evidence),
  f_set_by: Schema.NullOr(Schema.String),
  f_at: Schema.NullOr(Schema.String),
  f_seq: Schema.NullOr(DbInt)
})
export type WorkWithFieldRow = typeof WorkWithFieldRow.Type

export const ReviewRow = Schema.Struct({
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
export type ReviewRow = typeof ReviewRow.Type

/** A work item as the lists show it (`WorkSummary`). */
export const SummaryRow = Schema.Struct({
  work_id: Schema.String,
  title: Schema.String,
  status: Schema.String,
  head: Schema.String,
  seq: DbInt
})

/** A work item as the owner's dashboard lists it. */
export const ListedRow = Schema.Struct({
  work_id: Schema.String,
  title: Schema.String,
  status: Schema.String,
  claimant: Schema.NullOr(Schema.String),
  head: Schema.String,
  seq: DbInt,
  updated_at: Schema.String
})
export type ListedRow = typeof ListedRow.Type

export const fieldOf = (r: FieldRow): SettledField => ({
  value: r.value,
  evidence: r.evidence,
  set_by: r.set_by,
  at: r.at,
  seq: r.seq
})

export const reviewOf = (r: ReviewRow): ReviewState => ({
  request_id: r.request_id,
  artifact: { uri: r.artifact_uri, sha256: r.artifact_sha256 },
  reviewer: r.reviewer,
  requested_by: r.requested_by,
  requested_seq: r.requested_seq,
  status: r.status,
  verdict_by: r.verdict_by,
  verdict_seq: r.verdict_seq
})

/** The working state of a head row, before its fields and reviews are added. */
export const workingOf = (workId: string, row: WorkRow): Working => ({
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
