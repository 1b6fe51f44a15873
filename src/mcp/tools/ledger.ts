import { Effect, Schema, Struct } from "effect"
import {
  AppendEvent,
  Artifact,
  Evidence,
  EventHash,
  ReviewState,
  SettledField,
  Sha256,
  Verdict,
  WorkId,
  WorkState
} from "../../domain/Ledger.js"
import { Ledger } from "../../services/Ledger.js"
import { APPEND_ONLY, defineTool, READ_ONLY } from "../Registry.js"

const ExpectedHead = Schema.NullOr(EventHash).annotations({
  description: "the head you believe you extend (null to create the item); a moved head is refused with head_moved"
})

export const LedgerAppendInput = Schema.Struct({
  work_id: WorkId,
  expected_head: ExpectedHead,
  events: Schema.Array(AppendEvent).pipe(Schema.minItems(1), Schema.maxItems(100)).annotations({
    description: "appended all or none; a new item starts with {type:'opened', title}"
  })
})
const AppendOutput = Schema.Struct({ work_id: Schema.String, head: Schema.String, seq: Schema.Number })

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

const StatusOutput = Schema.Struct({
  work_id: Schema.String,
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
    claimant: Schema.NullOr(Schema.Struct({
      connection_id: Schema.String,
      connection_short: Schema.String,
      agent_name: Schema.String,
      last_seen_at: Schema.NullOr(Schema.String),
      revoked: Schema.Boolean
    }))
  })
})

const LogOutput = Schema.Struct({
  work_id: Schema.String,
  head: Schema.String,
  events: Schema.Array(LedgerEventRow),
  next_before_seq: Schema.NullOr(Schema.Number)
})

const Change = Schema.Struct({ field: Schema.String, before: Schema.NullOr(SettledField), after: Schema.NullOr(SettledField) })
const Pair = <S extends Schema.Schema.Any>(s: S) => Schema.Struct({ before: s, after: s })
const DiffOutput = Schema.Struct({
  work_id: Schema.String,
  from: Schema.Struct({ head: Schema.String, seq: Schema.Number }),
  to: Schema.Struct({ head: Schema.String, seq: Schema.Number }),
  events: Schema.Number,
  status: Pair(Schema.Literal("open", "closed")),
  claimant: Pair(Schema.NullOr(Schema.String)),
  changes: Schema.Array(Change)
})

/** The `ledger` group: the hash-chained record of each work item's state. */
export const ledgerTools = Effect.gen(function*() {
  const ledger = yield* Ledger
  return [
    defineTool({
      name: "sophia.ledger_append",
      group: "ledger",
      access: "coordinate",
      description:
        "Append events to a work item's hash-chained ledger (opened, claimed, released, asserted field/value, closed). Names the head it extends; all or none.",
      annotations: APPEND_ONLY,
      input: LedgerAppendInput,
      output: AppendOutput,
      handler: (input, { caller }) => ledger.append(caller, input)
    }),
    defineTool({
      name: "sophia.ledger_status",
      group: "ledger",
      access: "read",
      description:
        "A work item's settled state (fields with value, evidence, who, when, seq) kept apart from what is observed now (pending reviews, claimant last seen).",
      annotations: READ_ONLY,
      input: Schema.Struct({ work_id: WorkId }),
      output: StatusOutput,
      handler: (input, { caller }) => ledger.status(caller, input.work_id)
    }),
    defineTool({
      name: "sophia.ledger_log",
      group: "ledger",
      access: "read",
      description: "A work item's events with their hashes, newest first; page with before_seq.",
      annotations: READ_ONLY,
      input: Schema.Struct({
        work_id: WorkId,
        limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 200))).annotations({ description: "default 50" }),
        before_seq: Schema.optional(Schema.Int.pipe(Schema.positive()))
      }),
      output: LogOutput,
      projection: { key: "events", row: LedgerEventRow, compact: LEDGER_LOG_COMPACT },
      handler: (input, { caller }) => ledger.log(caller, input)
    }),
    defineTool({
      name: "sophia.ledger_diff",
      group: "ledger",
      access: "read",
      description: "Field changes (before/after value and evidence) between two heads of a work item; to defaults to the current head.",
      annotations: READ_ONLY,
      input: Schema.Struct({ work_id: WorkId, from: EventHash, to: Schema.optional(EventHash) }),
      output: DiffOutput,
      projection: { key: "changes", row: Change, compact: ["field", "before", "after"] },
      handler: (input, { caller }) => ledger.diff(caller, input)
    }),
    defineTool({
      name: "sophia.review_request",
      group: "ledger",
      access: "coordinate",
      description:
        "Ask for an independent review of an exact artifact (uri + sha256); returns a durable request_id. Who did the work cannot give the verdict.",
      annotations: APPEND_ONLY,
      input: Schema.Struct({
        work_id: WorkId,
        expected_head: EventHash,
        artifact: Artifact,
        reviewer: Schema.optional(Schema.String).annotations({ description: "connection id, short id or name" })
      }),
      output: Schema.Struct({ request_id: Schema.String, work_id: Schema.String, head: Schema.String, seq: Schema.Number }),
      handler: (input, { caller }) => ledger.requestReview(caller, input)
    }),
    defineTool({
      name: "sophia.review_verdict",
      group: "ledger",
      access: "coordinate",
      description:
        "Answer a review request for the artifact it named; approved records field review as verified. Refused for anyone who claimed, asserted or requested on the item.",
      annotations: APPEND_ONLY,
      input: Schema.Struct({
        request_id: Schema.String,
        expected_head: EventHash,
        verdict: Verdict,
        artifact_sha256: Sha256,
        notes: Schema.optional(Schema.String.pipe(Schema.maxLength(4000)))
      }),
      output: AppendOutput,
      handler: (input, { caller }) => ledger.giveVerdict(caller, input)
    })
  ]
})
