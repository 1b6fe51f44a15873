import { Schema, Struct } from "effect"
import { checkJson, formatJsonIssue, JSON_MAX_DEPTH, JsonValue } from "./Json.js"

/**
 * The ledger contract: the typed events every work item's history is made of, implementation-free.
 *
 * Each stored event carries `work_id, seq, parent, type, data, evidence, actor, at, hash`, with
 * `hash = sha256("sophia-ledger-v1\0" ‖ parent ‖ JCS(event without hash))` (RFC 8785 canonical JSON;
 * `parent` is the empty string for the first event). The contract is frozen by `LEDGER_CONTRACT_HASH`:
 * the SHA-256 of the RFC 8785 canonical JSON of `JSONSchema.make(LedgerEvent)`. A test recomputes it;
 * any change to the vocabulary fails until the constant is deliberately bumped with a new version.
 */

/** Bump together with LEDGER_CONTRACT_HASH when the vocabulary changes on purpose. */
export const LEDGER_CONTRACT_VERSION = 1
export const LEDGER_CONTRACT_HASH = "cbd1924d767978dce892e2a6813d601324a6a62c7e6cfcffd47a3e9ac111446a"
/** The domain separator prefixed to every event hash. */
export const LEDGER_HASH_DOMAIN = "sophia-ledger-v1\0"

/** Evidence classes, weakest first: an agent about its own work < the server saw it < an independent verdict. */
export const EVIDENCE = ["asserted", "observed", "verified"] as const
export const Evidence = Schema.Literal(...EVIDENCE)
export type Evidence = typeof Evidence.Type
export const evidenceRank = (e: Evidence): number => EVIDENCE.indexOf(e)

export const EventHash = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/)).annotations({
  description: "a head hash"
})
export const WorkId = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._:\/-]{0,127}$/)).annotations({
  description: "e.g. issue-42"
})
export const FieldName = Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9_.-]{0,63}$/)).annotations({
  description: "free-form field key, e.g. status, progress, branch"
})
export const Sha256 = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/)).annotations({
  description: "sha256 hex of the artifact's exact bytes"
})
export const Verdict = Schema.Literal("approved", "changes_requested", "rejected")
export type Verdict = typeof Verdict.Type
export const Artifact = Schema.Struct({
  uri: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2048)),
  sha256: Sha256
})
export type Artifact = typeof Artifact.Type

const Text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

/** The fields every stored event carries besides its type, data and evidence. */
const envelope = {
  work_id: Schema.String,
  seq: Schema.Number,
  parent: Schema.NullOr(Schema.String),
  /** the connection id that appended it, or `server` for what the server observed itself */
  actor: Schema.String,
  at: Schema.String,
  hash: Schema.String
}

const event = <T extends string, D extends Schema.Struct.Fields, E extends Schema.Schema.Any>(
  type: T,
  data: D,
  evidence: E
) => Schema.Struct({ ...envelope, type: Schema.Literal(type), data: Schema.Struct(data), evidence })

export const OpenedEvent = event("opened", { title: Schema.String }, Schema.Literal("asserted"))
export const ClaimedEvent = event("claimed", {}, Schema.Literal("asserted"))
export const ReleasedEvent = event("released", {}, Schema.Literal("asserted"))
export const AssertedEvent = event("asserted", { field: Schema.String, value: Schema.Unknown }, Schema.Literal("asserted"))
export const ObservedEvent = event(
  "observed",
  { field: Schema.String, value: Schema.Unknown, source: Schema.String },
  Schema.Literal("observed")
)
export const ReviewRequestedEvent = event(
  "review_requested",
  { request_id: Schema.String, artifact: Schema.Struct({ uri: Schema.String, sha256: Schema.String }), reviewer: Schema.NullOr(Schema.String) },
  Schema.Literal("asserted")
)
/** An approving verdict is the only source of `verified`; the others are the reviewer's assertion. */
export const ReviewVerdictEvent = event(
  "review_verdict",
  { request_id: Schema.String, verdict: Verdict, artifact_sha256: Schema.String, notes: Schema.NullOr(Schema.String) },
  Schema.Literal("verified", "asserted")
)
export const ClosedEvent = event("closed", { resolution: Schema.String }, Schema.Literal("asserted"))

/** The contract: every event a ledger may hold. */
export const LedgerEvent = Schema.Union(
  OpenedEvent,
  ClaimedEvent,
  ReleasedEvent,
  AssertedEvent,
  ObservedEvent,
  ReviewRequestedEvent,
  ReviewVerdictEvent,
  ClosedEvent
).annotations({ identifier: "LedgerEvent", title: `sophia ledger event v${LEDGER_CONTRACT_VERSION}` })
export type LedgerEvent = typeof LedgerEvent.Type
export type LedgerEventType = LedgerEvent["type"]

/** Limits of one append (docs/architecture.md, "Limits"), said once, by the Schemas below. */
export const MAX_EVENTS_PER_APPEND = 100
export const MAX_VALUE_BYTES = 8 * 1024

/**
 * Why a value cannot be a ledger field's value, or undefined when it can: it must have a JSON form
 * (hashing takes its canonical JSON) of at most MAX_VALUE_BYTES.
 */
export const ledgerValueIssue = (value: unknown): string | undefined => {
  // depth and well-formed Unicode first: nothing below (nor any later hash) walks a hostile shape
  const issue = checkJson(value)
  if (issue) return formatJsonIssue(issue, "value")
  let text: string | undefined
  try {
    text = JSON.stringify(value === undefined ? null : value)
  } catch (e) {
    return `value is not JSON: ${(e as Error).message}`
  }
  if (text === undefined) return "value has no JSON form"
  const bytes = Buffer.byteLength(text)
  return bytes > MAX_VALUE_BYTES ? `value is ${bytes} bytes of JSON; the limit is ${MAX_VALUE_BYTES}` : undefined
}

/** A field's value as an agent sends it; no JSON Schema keyword says bytes of JSON or depth, its description does. */
export const LedgerValue = JsonValue.pipe(
  Schema.filter((value) => ledgerValueIssue(value) ?? true, {
    jsonSchema: {},
    description: `JSON ≤ ${MAX_VALUE_BYTES / 1024} KiB, depth ≤ ${JSON_MAX_DEPTH}`
  })
)

/** What an agent may append through `sophia.ledger_append` (always evidence `asserted`). */
export const AppendEvent = Schema.Union(
  Schema.Struct({ type: Schema.Literal("opened"), title: Text(500) }),
  Schema.Struct({ type: Schema.Literal("claimed") }),
  Schema.Struct({ type: Schema.Literal("released") }),
  Schema.Struct({ type: Schema.Literal("asserted"), field: FieldName, value: LedgerValue }),
  Schema.Struct({ type: Schema.Literal("closed"), resolution: Text(2000) })
)
export type AppendEvent = typeof AppendEvent.Type



/** One field of the settled state. */
export const SettledField = Schema.Struct({
  value: Schema.Unknown,
  evidence: Evidence,
  set_by: Schema.String,
  at: Schema.String,
  seq: Schema.Number
})
export type SettledField = typeof SettledField.Type

export const ReviewStatus = Schema.Literal("pending", "approved", "changes_requested", "rejected")
export const ReviewState = Schema.Struct({
  request_id: Schema.String,
  artifact: Artifact,
  reviewer: Schema.NullOr(Schema.String),
  requested_by: Schema.String,
  requested_seq: Schema.Number,
  status: ReviewStatus,
  verdict_by: Schema.NullOr(Schema.String),
  verdict_seq: Schema.NullOr(Schema.Number)
})
export type ReviewState = typeof ReviewState.Type

/** The state a work item's events fold into; replaying the same events always gives the same state. */
export const WorkState = Schema.Struct({
  work_id: Schema.String,
  head: Schema.String,
  seq: Schema.Number,
  title: Schema.String,
  status: Schema.Literal("open", "closed"),
  resolution: Schema.NullOr(Schema.String),
  claimant: Schema.NullOr(Schema.String),
  /** connections that claimed the item, asserted on it or requested a review: never its reviewer */
  workers: Schema.Array(Schema.String),
  fields: Schema.Record({ key: Schema.String, value: SettledField }),
  reviews: Schema.Record({ key: Schema.String, value: ReviewState })
})
export type WorkState = typeof WorkState.Type

// ---------------------------------------------------------------------------------------------------
// Tool arguments and results (the single source of the tools' JSON Schemas and of the service's types)

const ExpectedHead = Schema.NullOr(EventHash).annotations({
  description: "the head you extend (null: create); else head_moved"
})

export const LedgerAppendInput = Schema.Struct({
  work_id: WorkId,
  expected_head: ExpectedHead,
  events: Schema.Array(AppendEvent).pipe(Schema.minItems(1), Schema.maxItems(MAX_EVENTS_PER_APPEND)).annotations({
    description: "appended all or none; a new item starts with {type:'opened', title}"
  })
})
export type LedgerAppendInput = typeof LedgerAppendInput.Type

export const AppendResult = Schema.Struct({ work_id: Schema.String, head: Schema.String, seq: Schema.Number })
export type AppendResult = typeof AppendResult.Type

export const WorkRef = Schema.Struct({ work_id: WorkId })

/** One stored event as the log shows it. */
export const LedgerEventRow = Schema.Struct({
  work_id: Schema.String,
  seq: Schema.Number,
  parent: Schema.NullOr(Schema.String),
  type: Schema.String,
  data: Schema.Unknown,
  evidence: Evidence,
  actor: Schema.String,
  at: Schema.String,
  hash: Schema.String
})
export const LEDGER_LOG_COMPACT = ["seq", "type", "data", "evidence", "hash"] as const

const PendingReview = Schema.Struct({
  request_id: Schema.String,
  artifact: Artifact,
  reviewer: Schema.NullOr(Schema.String),
  requested_by: Schema.String
})

/** A connection as the ledger's observed view shows it (looked up live, never stored in the chain). */
export const ObservedClaimant = Schema.Struct({
  connection_id: Schema.String,
  connection_short: Schema.String,
  agent_name: Schema.String,
  last_seen_at: Schema.NullOr(Schema.String),
  revoked: Schema.Boolean
})

export const LedgerStatus = Schema.Struct({
  work_id: Schema.String,
  /** the item's head, where every ledger tool reports it (the settled state repeats it, with its seq) */
  head: Schema.String,
  // the settled state is the contract's WorkState (less what is internal), with reviews listed
  settled: Schema.Struct({
    ...Struct.pick(WorkState.fields, "head", "seq", "title", "status", "resolution", "claimant", "fields"),
    reviews: Schema.Array(Schema.Struct({
      request_id: Schema.String,
      status: ReviewState.fields.status,
      verdict_by: Schema.NullOr(Schema.String)
    })),
    state_hash: Schema.String
  }),
  observed: Schema.Struct({
    observed_at: Schema.String,
    pending_reviews: Schema.Array(PendingReview),
    claimant: Schema.NullOr(ObservedClaimant)
  })
})
export type LedgerStatus = typeof LedgerStatus.Type

export const LedgerLogInput = Schema.Struct({
  work_id: WorkId,
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 200))).annotations({ description: "default 50" }),
  before_seq: Schema.optional(Schema.Int.pipe(Schema.positive()))
})
export type LedgerLogInput = typeof LedgerLogInput.Type

export const LedgerLog = Schema.Struct({
  work_id: Schema.String,
  head: Schema.String,
  events: Schema.Array(LedgerEventRow),
  next_before_seq: Schema.NullOr(Schema.Number)
})
export type LedgerLog = typeof LedgerLog.Type

export const LedgerDiffInput = Schema.Struct({ work_id: WorkId, from: EventHash, to: Schema.optional(EventHash) })
export type LedgerDiffInput = typeof LedgerDiffInput.Type

export const FieldChange = Schema.Struct({
  field: Schema.String,
  before: Schema.NullOr(SettledField),
  after: Schema.NullOr(SettledField)
})
const Pair = <S extends Schema.Schema.Any>(s: S) => Schema.Struct({ before: s, after: s })
export const LedgerDiff = Schema.Struct({
  work_id: Schema.String,
  from: Schema.Struct({ head: Schema.String, seq: Schema.Number }),
  to: Schema.Struct({ head: Schema.String, seq: Schema.Number }),
  events: Schema.Number,
  status: Pair(Schema.Literal("open", "closed")),
  claimant: Pair(Schema.NullOr(Schema.String)),
  changes: Schema.Array(FieldChange)
})
export type LedgerDiff = typeof LedgerDiff.Type

export const ReviewRequestInput = Schema.Struct({
  work_id: WorkId,
  expected_head: EventHash,
  artifact: Artifact,
  reviewer: Schema.optional(Schema.String).annotations({ description: "connection id, short id or name" })
})
export type ReviewRequestInput = typeof ReviewRequestInput.Type
export const ReviewRequestResult = Schema.Struct({
  request_id: Schema.String,
  work_id: Schema.String,
  head: Schema.String,
  seq: Schema.Number
})

export const ReviewVerdictInput = Schema.Struct({
  request_id: Schema.String,
  expected_head: EventHash,
  verdict: Verdict,
  artifact_sha256: Sha256,
  notes: Schema.optional(Schema.String.pipe(Schema.maxLength(4000)))
})
export type ReviewVerdictInput = typeof ReviewVerdictInput.Type

/** A work item as listings show it (orient's claimed work, the portal's list). */
export const WorkSummary = Schema.Struct({
  work_id: Schema.String,
  title: Schema.String,
  status: Schema.String,
  head: Schema.String,
  seq: Schema.Number
})
export type WorkSummary = typeof WorkSummary.Type

// ---------------------------------------------------------------------------------------------------
// Refusals

export class HeadMoved extends Schema.TaggedError<HeadMoved>()("HeadMoved", {
  work_id: Schema.String,
  expected: Schema.NullOr(Schema.String),
  actual: Schema.NullOr(Schema.String)
}) {
  override get message() {
    return this.actual === null
      ? `work item ${JSON.stringify(this.work_id)} does not exist; create it with expected_head null`
      : this.expected === null
      ? `work item ${JSON.stringify(this.work_id)} already exists (head ${this.actual}); read it and extend its head`
      : `the head of ${JSON.stringify(this.work_id)} moved: expected ${this.expected}, actual ${this.actual}; re-read and retry`
  }
}

export class EvidenceDowngrade extends Schema.TaggedError<EvidenceDowngrade>()("EvidenceDowngrade", {
  field: Schema.String,
  current: Evidence,
  attempted: Evidence
}) {
  override get message() {
    return `field ${JSON.stringify(this.field)} is ${this.current}; ${this.attempted} evidence cannot overwrite it`
  }
}

export class SelfCertification extends Schema.TaggedError<SelfCertification>()("SelfCertification", {
  request_id: Schema.String,
  connection_id: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `this connection ${this.reason} on the work under review, so it cannot give the verdict on ${this.request_id}; another connection must review it`
  }
}

export class InvalidTransition extends Schema.TaggedError<InvalidTransition>()("InvalidTransition", {
  detail: Schema.String,
  /** the connection holding the item, when that is why (the Ledger adds its name and the ways forward) */
  claimant: Schema.optional(Schema.String),
  agent_name: Schema.optional(Schema.String),
  /** what the caller can do instead */
  next: Schema.optional(Schema.Array(Schema.String))
}) {
  override get message() {
    return this.next === undefined || this.next.length === 0 ? this.detail : `${this.detail}. Ways forward: ${this.next.join("; ")}`
  }
}
