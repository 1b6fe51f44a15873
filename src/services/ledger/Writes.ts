import { Clock, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../../domain/Auth.js"
import { ValidationError } from "../../domain/Errors.js"
import type { LedgerAppendInput, ReviewRequestInput, ReviewVerdictInput } from "../../domain/Ledger.js"
import { InvalidTransition, ledgerValueIssue } from "../../domain/Ledger.js"
import type { Draft } from "../../domain/LedgerCore.js"
import { draftOf, REVIEW_FIELD } from "../../domain/LedgerCore.js"
import { CLAIM_TAKEOVER_FIELD, orphanOf } from "../../domain/Orphans.js"
import type { Auth } from "../Auth.js"
import { spanned } from "../Spans.js"
import type { Commit } from "./Commit.js"
import { CURRENT, SERVER } from "./Commit.js"
import type { LedgerStore } from "./Store.js"

/**
 * The ledger's writes (a module of the Ledger service): an agent's append, the server's own
 * observations, review requests and verdicts — each the drafts it proposes and the rule that is its own
 * (no agent writes the review field; a claim may take over a gone claimant's), then the one write path.
 */
export const makeWrites = (deps: {
  readonly commit: Commit
  readonly store: LedgerStore
  readonly auth: Auth
  readonly silentAfterS: number
}) => {
  const { auth, commit, silentAfterS, store } = deps

  /**
   * The server's observation that `previous`, the item's claimant, is gone (revoked or silent) and
   * `claimer` takes the claim over: drafted ahead of the claim, or nothing while the claimant is live.
   */
  const takeover = (previous: string | null, claimer: string) =>
    Effect.gen(function*() {
      if (previous === null || previous === claimer) return []
      const gone = orphanOf(Option.getOrUndefined(yield* auth.get(previous)), yield* Clock.currentTimeMillis, silentAfterS)
      if (gone === undefined) return []
      return [{
        type: "observed",
        data: {
          field: CLAIM_TAKEOVER_FIELD,
          value: { previous_claimant: previous, reason: gone.reason, since: gone.since, by: claimer },
          source: `claimant ${previous} ${gone.reason}`
        },
        evidence: "observed",
        actor: SERVER
      }] satisfies ReadonlyArray<Draft>
    })

  /**
   * A refusal because another connection holds the item, told as an agent would act on it: the holder by
   * name, and the ways forward — ask it, wait on it, or take the item over once it is gone.
   */
  const claimedElsewhere = (caller: Caller, workId: string, refusal: InvalidTransition) =>
    Effect.gen(function*() {
      const claimant = refusal.claimant
      if (claimant === undefined) return yield* refusal
      const info = Option.filter(yield* auth.get(claimant), (c) => c.user_id === caller.userId)
      const name = Option.isSome(info) ? info.value.name : claimant.slice(0, 8)
      const holder = `${name} (${claimant.slice(0, 8)})`
      return yield* new InvalidTransition({
        detail: refusal.detail.replace(claimant, holder),
        claimant,
        agent_name: name,
        next: [
          `ask it: sophia.coordination_post({ channel: "arc:${workId}", kind: "question", to: "${name}", body: "…" })`,
          `wait for it: sophia.declare_wait({ on: "${name}", predicate: { type: "post_exists", channel: "arc:${workId}", kind: "closeout" }, reason: "…" })`,
          `take it over once ${name} is revoked or silent for ${silentAfterS} s (sophia.wait_graph lists it under orphaned): append { type: "claimed" } then`
        ]
      })
    })

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
      return yield* commit(caller.userId, input.work_id, input.expected_head, drafts).pipe(
        Effect.catchTag("InvalidTransition", (e) => claimedElsewhere(caller, input.work_id, e))
      )
    }
    // a claim on an item another connection holds: allowed exactly when that claimant is gone (revoked,
    // or silent), and then recorded first as the server's observation of the takeover (decided on the
    // head row the append reads, inside its transaction)
    return yield* commit(caller.userId, input.work_id, input.expected_head, drafts, {
      fields: [CLAIM_TAKEOVER_FIELD],
      drafts: (row) => takeover(row.claimant, caller.connectionId)
    }).pipe(Effect.catchTag("InvalidTransition", (e) => claimedElsewhere(caller, input.work_id, e)))
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

  /** `sophia.review_verdict`: the answer to one request, by a connection that did not do the work. */
  const giveVerdict = spanned("Ledger.giveVerdict", Effect.fnUntraced(function*(caller: Caller, input: ReviewVerdictInput) {
    const workId = yield* store.workOfReview(caller.userId, input.request_id)
    if (workId === undefined) return yield* new InvalidTransition({ detail: `no review request ${input.request_id}` })
    return yield* commit(caller.userId, workId, input.expected_head, [{
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

  return { append, observe, requestReview, giveVerdict } as const
}

/** What `makeWrites` gives: the ledger's write methods. */
export type Writes = ReturnType<typeof makeWrites>
