import { Effect } from "effect"
import {
  AppendResult,
  FieldChange,
  LEDGER_LOG_COMPACT,
  LedgerAppendInput,
  LedgerDiff,
  LedgerDiffInput,
  LedgerEventRow,
  LedgerLog,
  LedgerLogInput,
  LedgerStatus,
  ReviewRequestInput,
  ReviewRequestResult,
  ReviewVerdictInput,
  WorkRef
} from "../../domain/Ledger.js"
import { Ledger } from "../../services/Ledger.js"
import { APPEND_ONLY, defineTool, READ_ONLY } from "../Registry.js"

/** The `ledger` group: the hash-chained record of each work item's state. */
export const ledgerTools = Effect.gen(function*() {
  const ledger = yield* Ledger
  return [
    defineTool({
      name: "sophia.ledger_append",
      group: "ledger",
      access: "coordinate",
      description:
        "Append events to a work item's hash-chained ledger. Names the head it extends; all or none.",
      annotations: APPEND_ONLY,
      input: LedgerAppendInput,
      output: AppendResult,
      handler: (input, { caller }) => ledger.append(caller, input)
    }),
    defineTool({
      name: "sophia.ledger_status",
      group: "ledger",
      access: "read",
      description:
        "A work item's settled fields (value, evidence, who, when, seq), apart from what is observed now (pending reviews, claimant last seen).",
      annotations: READ_ONLY,
      input: WorkRef,
      output: LedgerStatus,
      handler: (input, { caller }) => ledger.status(caller, input.work_id)
    }),
    defineTool({
      name: "sophia.ledger_log",
      group: "ledger",
      access: "read",
      description: "A work item's events with their hashes, newest first; page with before_seq.",
      annotations: READ_ONLY,
      input: LedgerLogInput,
      output: LedgerLog,
      projection: { key: "events", row: LedgerEventRow, compact: LEDGER_LOG_COMPACT },
      handler: (input, { caller }) => ledger.log(caller, input)
    }),
    defineTool({
      name: "sophia.ledger_diff",
      group: "ledger",
      access: "read",
      description: "Field changes (before/after value, evidence) between two heads of a work item; to: default the current head.",
      annotations: READ_ONLY,
      input: LedgerDiffInput,
      output: LedgerDiff,
      projection: { key: "changes", row: FieldChange, compact: ["field", "before", "after"] },
      handler: (input, { caller }) => ledger.diff(caller, input)
    }),
    defineTool({
      name: "sophia.review_request",
      group: "ledger",
      access: "coordinate",
      description:
        "Ask for an independent review of an exact artifact (a durable request_id). Who did the work cannot give the verdict.",
      annotations: APPEND_ONLY,
      input: ReviewRequestInput,
      output: ReviewRequestResult,
      handler: (input, { caller }) => ledger.requestReview(caller, input)
    }),
    defineTool({
      name: "sophia.review_verdict",
      group: "ledger",
      access: "coordinate",
      description:
        "Answer a review request; approved records field review as verified. Refused to anyone who claimed, asserted or requested on the item.",
      annotations: APPEND_ONLY,
      input: ReviewVerdictInput,
      output: AppendResult,
      handler: (input, { caller }) => ledger.giveVerdict(caller, input)
    })
  ]
})
