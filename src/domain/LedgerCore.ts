import { ValidationError } from "./Errors.js"
import { CLAIM_TAKEOVER_FIELD } from "./Orphans.js"
import type { AppendEvent, Evidence, LedgerEvent, ReviewState, SettledField, WorkState } from "./Ledger.js"
import { EvidenceDowngrade, evidenceRank, InvalidTransition, SelfCertification } from "./Ledger.js"

/**
 * The ledger's rules: the fold of one event onto a work item's state (what a valid transition is:
 * evidence classes, no downgrade, no self-certification), and the drafts an append proposes. Pure. The
 * same fold validates an append (services/ledger/Commit.ts) and replays a stored history
 * (LedgerReplay.ts, `sophia ledger verify`), so what was accepted is exactly what replays; the hashing is
 * LedgerHash.ts.
 */

/** The settled field an approving verdict writes (with `verified` evidence); agents cannot assert it. */
export const REVIEW_FIELD = "review"

/** A mutable working copy of a work item's state (fields and reviews may be partial: only the keys an append touches). */
export interface Working {
  work_id: string
  head: string
  seq: number
  title: string
  status: "open" | "closed"
  resolution: string | null
  claimant: string | null
  workers: Array<string>
  fields: Record<string, SettledField>
  reviews: Record<string, ReviewState>
}

export type FoldRefusal = InvalidTransition | EvidenceDowngrade | SelfCertification | ValidationError

/** The evidence each event type may carry. */
export const EVIDENCE_OF: Readonly<Record<LedgerEvent["type"], ReadonlyArray<Evidence>>> = {
  opened: ["asserted"],
  claimed: ["asserted"],
  released: ["asserted"],
  asserted: ["asserted"],
  observed: ["observed"],
  review_requested: ["asserted"],
  review_verdict: ["verified", "asserted"],
  closed: ["asserted"]
}

/** After a close, only what the server sees and the review lifecycle may still be recorded. */
const AFTER_CLOSE = new Set<LedgerEvent["type"]>(["observed", "review_requested", "review_verdict"])

const addWorker = (state: Working, actor: string) => {
  if (!state.workers.includes(actor)) {
    state.workers.push(actor)
    state.workers.sort()
  }
}

const setField = (state: Working, event: LedgerEvent, field: string, value: unknown): EvidenceDowngrade | undefined => {
  const current = state.fields[field]
  if (current && evidenceRank(event.evidence) < evidenceRank(current.evidence)) {
    return new EvidenceDowngrade({ field, current: current.evidence, attempted: event.evidence })
  }
  state.fields[field] = { value, evidence: event.evidence, set_by: event.actor, at: event.at, seq: event.seq }
  return undefined
}

/**
 * Apply one event to a state (`null` before the first event), in place. Returns the refusal when the
 * event is not a valid transition; the state must then be discarded.
 */
export const applyEvent = (state: Working | null, event: LedgerEvent): { state: Working } | { refusal: FoldRefusal } => {
  if (!EVIDENCE_OF[event.type]?.includes(event.evidence)) {
    return { refusal: new InvalidTransition({ detail: `a ${event.type} event cannot carry ${event.evidence} evidence` }) }
  }
  if (state === null) {
    if (event.type !== "opened") {
      return { refusal: new InvalidTransition({ detail: `a work item starts with an opened event, not ${event.type}` }) }
    }
    return {
      state: {
        work_id: event.work_id,
        head: event.hash,
        seq: event.seq,
        title: event.data.title,
        status: "open",
        resolution: null,
        claimant: null,
        workers: [],
        fields: {},
        reviews: {}
      }
    }
  }
  if (state.status === "closed" && !AFTER_CLOSE.has(event.type)) {
    return { refusal: new InvalidTransition({ detail: `work item ${state.work_id} is closed; ${event.type} is not allowed` }) }
  }
  const fail = (detail: string) => ({ refusal: new InvalidTransition({ detail }) })
  switch (event.type) {
    case "opened":
      return fail(`work item ${state.work_id} is already open`)
    case "claimed":
      if (state.claimant !== null) {
        return { refusal: new InvalidTransition({ detail: `work item ${state.work_id} is already claimed by ${state.claimant}; it must be released first`, claimant: state.claimant }) }
      }
      state.claimant = event.actor
      addWorker(state, event.actor)
      break
    case "released":
      if (state.claimant === null) return fail(`work item ${state.work_id} is not claimed`)
      if (state.claimant !== event.actor) {
        return { refusal: new InvalidTransition({ detail: `work item ${state.work_id} is claimed by ${state.claimant}; only the claimant releases it`, claimant: state.claimant }) }
      }
      state.claimant = null
      break
    case "asserted": {
      const refusal = setField(state, event, event.data.field, event.data.value)
      if (refusal) return { refusal }
      addWorker(state, event.actor)
      break
    }
    case "observed": {
      const refusal = setField(state, event, event.data.field, event.data.value)
      if (refusal) return { refusal }
      // the server saw the claimant gone (revoked or silent) and a takeover: the claim is free again
      if (event.data.field === CLAIM_TAKEOVER_FIELD) {
        const previous = (event.data.value as { readonly previous_claimant?: unknown } | null)?.previous_claimant
        if (previous !== state.claimant) return fail(`claim_takeover names ${String(previous)}, but the claimant is ${state.claimant}`)
        state.claimant = null
      }
      break
    }
    case "review_requested":
      if (state.reviews[event.data.request_id]) return fail(`review request ${event.data.request_id} already exists`)
      state.reviews[event.data.request_id] = {
        request_id: event.data.request_id,
        artifact: { uri: event.data.artifact.uri, sha256: event.data.artifact.sha256 },
        reviewer: event.data.reviewer,
        requested_by: event.actor,
        requested_seq: event.seq,
        status: "pending",
        verdict_by: null,
        verdict_seq: null
      }
      addWorker(state, event.actor)
      break
    case "review_verdict": {
      const { request_id, verdict } = event.data
      const review = state.reviews[request_id]
      if (!review) return fail(`no review request ${request_id} on work item ${state.work_id}`)
      if (review.status !== "pending") return fail(`review request ${request_id} already has its verdict (${review.status})`)
      if (event.data.artifact_sha256 !== review.artifact.sha256) {
        return {
          refusal: new ValidationError({
            detail: `artifact_sha256 ${event.data.artifact_sha256} is not the artifact review ${request_id} asked about (${review.artifact.sha256})`
          })
        }
      }
      if (state.workers.includes(event.actor)) {
        const why = state.claimant === event.actor
          ? "holds the claim"
          : review.requested_by === event.actor
          ? "requested the review"
          : "claimed, asserted or requested a review"
        return { refusal: new SelfCertification({ request_id, connection_id: event.actor, reason: why }) }
      }
      if (review.reviewer !== null && review.reviewer !== event.actor) {
        return fail(`review request ${request_id} is addressed to reviewer ${review.reviewer}`)
      }
      if ((verdict === "approved") !== (event.evidence === "verified")) {
        return fail(`only an approving verdict is verified evidence`)
      }
      state.reviews[request_id] = { ...review, status: verdict, verdict_by: event.actor, verdict_seq: event.seq }
      if (verdict === "approved") {
        const refusal = setField(state, event, REVIEW_FIELD, {
          request_id,
          verdict,
          artifact: review.artifact
        })
        if (refusal) return { refusal }
      }
      break
    }
    case "closed":
      state.status = "closed"
      state.resolution = event.data.resolution
      break
  }
  state.head = event.hash
  state.seq = event.seq
  return { state }
}

/** A working state as the frozen `WorkState` (sorted, plain). */
export const settle = (state: Working): WorkState => ({
  work_id: state.work_id,
  head: state.head,
  seq: state.seq,
  title: state.title,
  status: state.status,
  resolution: state.resolution,
  claimant: state.claimant,
  workers: [...state.workers].sort(),
  fields: { ...state.fields },
  reviews: { ...state.reviews }
})

/** An event as an agent or the server proposes it, before the chain gives it seq, parent, time and hash. */
export type Draft = Pick<LedgerEvent, "type" | "data" | "evidence"> & { readonly actor: string }

export const draftOf = (event: AppendEvent, actor: string): Draft => {
  switch (event.type) {
    case "opened":
      return { type: "opened", data: { title: event.title }, evidence: "asserted", actor }
    case "claimed":
      return { type: "claimed", data: {}, evidence: "asserted", actor }
    case "released":
      return { type: "released", data: {}, evidence: "asserted", actor }
    case "asserted":
      return { type: "asserted", data: { field: event.field, value: event.value }, evidence: "asserted", actor }
    case "closed":
      return { type: "closed", data: { resolution: event.resolution }, evidence: "asserted", actor }
  }
}
