import { SqlClient } from "@effect/sql"
import canonicalize from "canonicalize"
import { Effect } from "effect"
import { createHash, randomUUID } from "node:crypto"
import type { Caller } from "../domain/Auth.js"
import { connectionShort } from "../domain/Auth.js"
import { NotFound, ValidationError } from "../domain/Errors.js"
import type { AppendEvent, Artifact, Evidence, LedgerEvent, ReviewState, SettledField, Verdict, WorkState } from "../domain/Ledger.js"
import {
  EvidenceDowngrade,
  evidenceRank,
  HeadMoved,
  InvalidTransition,
  LEDGER_HASH_DOMAIN,
  SelfCertification
} from "../domain/Ledger.js"
import { nowIso } from "../domain/Time.js"
import { Auth } from "./Auth.js"
import { Coordination } from "./Coordination.js"

/** The settled field an approving verdict writes (with `verified` evidence); agents cannot assert it. */
const REVIEW_FIELD = "review"

// ---------------------------------------------------------------------------------------------------
// The pure core: hashing and folding. The same code validates an append and replays a history.

/** RFC 8785 canonical JSON (the `canonicalize` package). */
export const jcs = (value: unknown): string => {
  const out = canonicalize(value)
  if (out === undefined) throw new Error("value has no JSON form")
  return out
}

/** `sha256("sophia-ledger-v1\0" ‖ parent ‖ JCS(event without hash))`, hex. */
export const eventHash = (event: Omit<LedgerEvent, "hash">): string =>
  createHash("sha256").update(LEDGER_HASH_DOMAIN).update(event.parent ?? "").update(jcs(event)).digest("hex")

/** The hash of a settled state: equal states, equal hashes, however they were reached. */
export const stateHash = (state: WorkState): string => createHash("sha256").update(jcs(state)).digest("hex")

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

const EVIDENCE_OF: Record<LedgerEvent["type"], ReadonlyArray<Evidence>> = {
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
      if (state.claimant !== null) return fail(`work item ${state.work_id} is already claimed by ${state.claimant}; it must be released first`)
      state.claimant = event.actor
      addWorker(state, event.actor)
      break
    case "released":
      if (state.claimant === null) return fail(`work item ${state.work_id} is not claimed`)
      if (state.claimant !== event.actor) return fail(`work item ${state.work_id} is claimed by ${state.claimant}; only the claimant releases it`)
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

export interface ChainBreak {
  readonly seq: number
  readonly reason: string
  readonly expected?: string | null
  readonly actual?: string | null
}

/**
 * Replay a work item's events from scratch: check seq, parent links, each hash and each transition.
 * Deterministic: the same events always give the same state and the same `stateHash`.
 */
export const replay = (events: ReadonlyArray<LedgerEvent>): { state: Working | null; break: ChainBreak | null } => {
  let state: Working | null = null
  let parent: string | null = null
  for (let i = 0; i < events.length; i++) {
    const event = events[i]
    if (event.seq !== i + 1) return { state, break: { seq: event.seq, reason: "seq gap", expected: String(i + 1), actual: String(event.seq) } }
    if (event.parent !== parent) return { state, break: { seq: event.seq, reason: "parent does not link to the previous event", expected: parent, actual: event.parent } }
    const hash = event.hash
    const recomputed = eventHash({
      work_id: event.work_id,
      seq: event.seq,
      parent: event.parent,
      type: event.type,
      data: event.data,
      evidence: event.evidence,
      actor: event.actor,
      at: event.at
    } as Omit<LedgerEvent, "hash">)
    if (recomputed !== hash) return { state, break: { seq: event.seq, reason: "hash mismatch", expected: recomputed, actual: hash } }
    const applied = applyEvent(state, event)
    if ("refusal" in applied) return { state, break: { seq: event.seq, reason: `invalid transition: ${applied.refusal.message}` } }
    state = applied.state
    parent = hash
  }
  return { state, break: null }
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

// ---------------------------------------------------------------------------------------------------
// Rows

interface WorkRow {
  readonly head: string
  readonly seq: number
  readonly title: string
  readonly status: "open" | "closed"
  readonly resolution: string | null
  readonly claimant: string | null
  readonly workers: string
}
interface EventRow {
  readonly work_id: string
  readonly seq: number
  readonly parent: string | null
  readonly type: string
  readonly data: string
  readonly evidence: string
  readonly actor: string
  readonly at: string
  readonly hash: string
}
interface FieldRow {
  readonly field: string
  readonly value: string
  readonly evidence: Evidence
  readonly set_by: string
  readonly at: string
  readonly seq: number
}
interface JoinedFieldRow {
  readonly f_field: string | null
  readonly f_value: string
  readonly f_evidence: Evidence
  readonly f_set_by: string
  readonly f_at: string
  readonly f_seq: number
}
interface ReviewRow {
  readonly request_id: string
  readonly artifact_uri: string
  readonly artifact_sha256: string
  readonly reviewer: string | null
  readonly requested_by: string
  readonly requested_seq: number
  readonly status: ReviewState["status"]
  readonly verdict_by: string | null
  readonly verdict_seq: number | null
}

export const eventOfRow = (row: EventRow): LedgerEvent =>
  ({
    work_id: row.work_id,
    seq: Number(row.seq),
    parent: row.parent,
    type: row.type,
    data: JSON.parse(row.data),
    evidence: row.evidence,
    actor: row.actor,
    at: row.at,
    hash: row.hash
  }) as LedgerEvent

const fieldOfRow = (r: FieldRow): SettledField => ({
  value: JSON.parse(r.value),
  evidence: r.evidence,
  set_by: r.set_by,
  at: r.at,
  seq: Number(r.seq)
})

const reviewOfRow = (r: ReviewRow): ReviewState => ({
  request_id: r.request_id,
  artifact: { uri: r.artifact_uri, sha256: r.artifact_sha256 },
  reviewer: r.reviewer,
  requested_by: r.requested_by,
  requested_seq: Number(r.requested_seq),
  status: r.status,
  verdict_by: r.verdict_by,
  verdict_seq: r.verdict_seq === null ? null : Number(r.verdict_seq)
})

/** An event as an agent or the server proposes it, before the chain gives it seq, parent, time and hash. */
type Draft = Pick<LedgerEvent, "type" | "data" | "evidence"> & { readonly actor: string }

const draftOf = (event: AppendEvent, actor: string): Draft => {
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

/** Limits of one append. */
export const MAX_EVENTS_PER_APPEND = 100
export const MAX_VALUE_BYTES = 8 * 1024

export interface AppendResult {
  readonly work_id: string
  readonly head: string
  readonly seq: number
}

export interface VerifyReport {
  readonly ok: boolean
  readonly work_items: number
  readonly events: number
  readonly first_break: (ChainBreak & { readonly user_id: string; readonly work_id: string }) | null
}

const SERVER = "server"

/**
 * The ledger: per-user work items, each an append-only hash chain of typed events with one head moved
 * only by compare-and-swap; evidence classes that never downgrade; reviews with separation of duties.
 */
export class Ledger extends Effect.Service<Ledger>()("sophia/Ledger", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const auth = yield* Auth
    const coordination = yield* Coordination

    const loadWork = (userId: string, workId: string) =>
      sql<WorkRow>`SELECT head, seq, title, status, resolution, claimant, workers FROM ledger_work
        WHERE user_id = ${userId} AND work_id = ${workId}`.pipe(Effect.map((rows) => rows[0]))

    const workingOf = (workId: string, row: WorkRow): Working => ({
      work_id: workId,
      head: row.head,
      seq: Number(row.seq),
      title: row.title,
      status: row.status,
      resolution: row.resolution,
      claimant: row.claimant,
      workers: JSON.parse(row.workers),
      fields: {},
      reviews: {}
    })

    const loadFields = (userId: string, workId: string) =>
      sql<FieldRow>`SELECT field, value, evidence, set_by, at, seq FROM ledger_fields
        WHERE user_id = ${userId} AND work_id = ${workId}`

    const loadReviews = (userId: string, workId: string, ids?: ReadonlyArray<string>) =>
      (ids === undefined
        ? sql<ReviewRow>`SELECT * FROM ledger_reviews WHERE user_id = ${userId} AND work_id = ${workId}`
        : sql<ReviewRow>`SELECT * FROM ledger_reviews WHERE user_id = ${userId} AND work_id = ${workId}
            AND ${sql.in("request_id", ids)}`)

    /** The materialized state of a work item, as the tables hold it. */
    const loadState = (userId: string, workId: string) =>
      Effect.gen(function*() {
        const row = yield* loadWork(userId, workId)
        if (!row) return undefined
        const state = workingOf(workId, row)
        for (const f of yield* loadFields(userId, workId)) state.fields[f.field] = fieldOfRow(f)
        for (const r of yield* loadReviews(userId, workId)) state.reviews[r.request_id] = reviewOfRow(r)
        return settle(state)
      })

    /**
     * The one write path: inside one transaction, check the head, fold the drafts onto the current
     * state, move the head by one conditional UPDATE (zero rows = refused), insert the events and the
     * changed fields and reviews. All or nothing.
     */
    const commit = (userId: string, workId: string, expected: string | null, drafts: ReadonlyArray<Draft>) =>
      Effect.gen(function*() {
        if (drafts.length === 0) return yield* new ValidationError({ detail: "events must hold at least one event" })
        // the fields and reviews this append touches: loaded with the head row, nothing else
        const names = new Set<string>()
        const ids = new Set<string>()
        for (const d of drafts) {
          if (d.type === "asserted" || d.type === "observed") names.add((d.data as { field: string }).field)
          if (d.type === "review_verdict") {
            names.add("review")
            ids.add((d.data as { request_id: string }).request_id)
          }
        }
        const joined = names.size === 0 ? undefined : yield* sql<WorkRow & Partial<JoinedFieldRow>>`SELECT w.head, w.seq,
            w.title, w.status, w.resolution, w.claimant, w.workers, f.field AS f_field, f.value AS f_value,
            f.evidence AS f_evidence, f.set_by AS f_set_by, f.at AS f_at, f.seq AS f_seq
          FROM ledger_work w LEFT JOIN ledger_fields f
            ON f.user_id = w.user_id AND f.work_id = w.work_id AND ${sql.in("f.field", [...names])}
          WHERE w.user_id = ${userId} AND w.work_id = ${workId}`
        const row = joined === undefined ? yield* loadWork(userId, workId) : joined[0]
        if (expected === null && row) return yield* new HeadMoved({ work_id: workId, expected, actual: row.head })
        if (expected !== null && (!row || row.head !== expected)) {
          return yield* new HeadMoved({ work_id: workId, expected, actual: row?.head ?? null })
        }
        let state: Working | null = row ? workingOf(workId, row) : null
        if (state) {
          for (const j of joined ?? []) {
            if (j.f_field != null) {
              state.fields[j.f_field] = fieldOfRow({
                field: j.f_field,
                value: j.f_value!,
                evidence: j.f_evidence!,
                set_by: j.f_set_by!,
                at: j.f_at!,
                seq: j.f_seq!
              })
            }
          }
          if (ids.size > 0) for (const r of yield* loadReviews(userId, workId, [...ids])) state.reviews[r.request_id] = reviewOfRow(r)
        }
        const at = yield* nowIso
        let parent = row?.head ?? null
        let seq = row ? Number(row.seq) : 0
        const events: Array<LedgerEvent> = []
        const touchedFields = new Set<string>()
        const touchedReviews = new Set<string>()
        for (const d of drafts) {
          seq += 1
          const body = { work_id: workId, seq, parent, type: d.type, data: d.data, evidence: d.evidence, actor: d.actor, at } as Omit<LedgerEvent, "hash">
          const event = { ...body, hash: eventHash(body) } as LedgerEvent
          const applied = applyEvent(state, event)
          if ("refusal" in applied) return yield* applied.refusal
          state = applied.state
          events.push(event)
          parent = event.hash
          if (event.type === "asserted" || event.type === "observed") touchedFields.add(event.data.field)
          if (event.type === "review_requested" || event.type === "review_verdict") touchedReviews.add(event.data.request_id)
          if (event.type === "review_verdict" && event.data.verdict === "approved") touchedFields.add("review")
        }
        const s = state!
        const workers = JSON.stringify(s.workers)
        // compare-and-swap on the head: exactly one writer extends a given head
        const moved = row
          ? yield* sql<{ seq: number }>`UPDATE ledger_work SET head = ${s.head}, seq = ${s.seq}, title = ${s.title},
              status = ${s.status}, resolution = ${s.resolution}, claimant = ${s.claimant}, workers = ${workers},
              updated_at = ${at}
              WHERE user_id = ${userId} AND work_id = ${workId} AND head = ${expected} RETURNING seq`
          : yield* sql<{ seq: number }>`INSERT INTO ledger_work (user_id, work_id, head, seq, title, status, resolution,
              claimant, workers, created_at, updated_at)
              VALUES (${userId}, ${workId}, ${s.head}, ${s.seq}, ${s.title}, ${s.status}, ${s.resolution}, ${s.claimant},
                ${workers}, ${at}, ${at})
              ON CONFLICT (user_id, work_id) DO NOTHING RETURNING seq`
        if (moved.length === 0) {
          const now = yield* loadWork(userId, workId)
          return yield* new HeadMoved({ work_id: workId, expected, actual: now?.head ?? null })
        }
        yield* sql`INSERT INTO ledger_events ${
          sql.insert(events.map((e) => ({
            user_id: userId,
            work_id: workId,
            seq: e.seq,
            parent: e.parent,
            type: e.type,
            data: jcs(e.data),
            evidence: e.evidence,
            actor: e.actor,
            at: e.at,
            hash: e.hash
          })))
        }`
        if (touchedFields.size > 0) {
          yield* sql`INSERT INTO ledger_fields ${
            sql.insert([...touchedFields].map((name) => {
              const f = s.fields[name]
              return { user_id: userId, work_id: workId, field: name, value: jcs(f.value), evidence: f.evidence, set_by: f.set_by, at: f.at, seq: f.seq }
            }))
          }
            ON CONFLICT (user_id, work_id, field) DO UPDATE SET value = excluded.value, evidence = excluded.evidence,
              set_by = excluded.set_by, at = excluded.at, seq = excluded.seq`
        }
        for (const id of touchedReviews) {
          const r = s.reviews[id]
          yield* sql`INSERT INTO ledger_reviews (request_id, user_id, work_id, artifact_uri, artifact_sha256, reviewer,
              requested_by, requested_seq, status, verdict_by, verdict_seq)
            VALUES (${id}, ${userId}, ${workId}, ${r.artifact.uri}, ${r.artifact.sha256}, ${r.reviewer}, ${r.requested_by},
              ${r.requested_seq}, ${r.status}, ${r.verdict_by}, ${r.verdict_seq})
            ON CONFLICT (request_id) DO UPDATE SET status = excluded.status, verdict_by = excluded.verdict_by,
              verdict_seq = excluded.verdict_seq`
        }
        return { work_id: workId, head: s.head, seq: s.seq } satisfies AppendResult
      }).pipe(sql.withTransaction)

    const checkValue = (value: unknown) =>
      Effect.gen(function*() {
        let text: string
        try {
          text = jcs(value === undefined ? null : value)
        } catch (e) {
          return yield* new ValidationError({ detail: `value is not JSON: ${(e as Error).message}` })
        }
        const bytes = Buffer.byteLength(text)
        if (bytes > MAX_VALUE_BYTES) {
          return yield* new ValidationError({ detail: `value is ${bytes} bytes of JSON; the limit is ${MAX_VALUE_BYTES}` })
        }
      })

    /** `sophia.ledger_append`: an agent's events, all `asserted`, all or none. */
    const append = Effect.fn("Ledger.append")(function*(
      caller: Caller,
      input: { readonly work_id: string; readonly expected_head: string | null; readonly events: ReadonlyArray<AppendEvent> }
    ) {
      if (input.events.length === 0) return yield* new ValidationError({ detail: "events must hold at least one event" })
      if (input.events.length > MAX_EVENTS_PER_APPEND) {
        return yield* new ValidationError({ detail: `at most ${MAX_EVENTS_PER_APPEND} events per append` })
      }
      for (const e of input.events) {
        if (e.type !== "asserted") continue
        // `review` is the verdict's field: an agent's own "approved" must not sit there, even as `asserted`
        if (e.field === REVIEW_FIELD) {
          return yield* new ValidationError({
            detail: "the field review is written only by sophia.review_verdict; request a review instead"
          })
        }
        yield* checkValue(e.value)
      }
      const drafts = input.events.map((e) => draftOf(e, caller.connectionId))
      return yield* commit(caller.userId, input.work_id, input.expected_head, drafts)
    }, Effect.catchTag("SqlError", Effect.die))

    /**
     * What the server witnessed itself (a wait resolved, a closeout on the item's channel, a claimant's
     * connection revoked…), recorded as `observed` on the current head. For other services, never agents.
     */
    const observe = Effect.fn("Ledger.observe")(function*(
      userId: string,
      workId: string,
      field: string,
      value: unknown,
      source: string
    ) {
      yield* checkValue(value)
      const row = yield* loadWork(userId, workId)
      if (!row) return yield* new NotFound({ what: "work item", id: workId })
      return yield* commit(userId, workId, row.head, [{
        type: "observed",
        data: { field, value: value === undefined ? null : value, source },
        evidence: "observed",
        actor: SERVER
      }])
    }, Effect.catchTag("SqlError", Effect.die))

    /** A reviewer named by full id, short id or name among the user's live connections. */
    const resolveReviewer = (userId: string, selector: string) =>
      Effect.map(auth.resolve(userId, selector), (info) => info.connection_id)

    /** `sophia.review_request`: mint a durable request id for an exact artifact. */
    const requestReview = Effect.fn("Ledger.requestReview")(function*(
      caller: Caller,
      input: { readonly work_id: string; readonly expected_head: string; readonly artifact: Artifact; readonly reviewer?: string | undefined }
    ) {
      const reviewer = input.reviewer === undefined ? null : yield* resolveReviewer(caller.userId, input.reviewer)
      const request_id = `rev_${randomUUID()}`
      const result = yield* commit(caller.userId, input.work_id, input.expected_head, [{
        type: "review_requested",
        data: { request_id, artifact: { uri: input.artifact.uri, sha256: input.artifact.sha256 }, reviewer },
        evidence: "asserted",
        actor: caller.connectionId
      }])
      return { request_id, ...result }
    }, Effect.catchTag("SqlError", Effect.die))

    /** `sophia.review_verdict`: the answer to one request, by a connection that did not do the work. */
    const giveVerdict = Effect.fn("Ledger.giveVerdict")(function*(
      caller: Caller,
      input: {
        readonly request_id: string
        readonly expected_head: string
        readonly verdict: Verdict
        readonly artifact_sha256: string
        readonly notes?: string | undefined
      }
    ) {
      const found = yield* sql<{ work_id: string }>`SELECT work_id FROM ledger_reviews
        WHERE request_id = ${input.request_id} AND user_id = ${caller.userId}`
      if (found.length === 0) return yield* new InvalidTransition({ detail: `no review request ${input.request_id}` })
      return yield* commit(caller.userId, found[0].work_id, input.expected_head, [{
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
    }, Effect.catchTag("SqlError", Effect.die))

    const mustState = (userId: string, workId: string) =>
      Effect.flatMap(loadState(userId, workId), (s) => s ? Effect.succeed(s) : Effect.fail(new NotFound({ what: "work item", id: workId })))

    /** Settled state (from the ledger) kept apart from what is observed at read time. */
    const status = Effect.fn("Ledger.status")(function*(caller: Caller, workId: string) {
      const settled = yield* mustState(caller.userId, workId)
      const observedAt = yield* nowIso
      const pending = Object.values(settled.reviews).filter((r) => r.status === "pending")
      let claimant: {
        connection_id: string
        connection_short: string
        agent_name: string
        last_seen_at: string | null
        revoked: boolean
      } | null = null
      if (settled.claimant !== null) {
        const rows = yield* sql<{ name: string; last_seen_at: string | null; revoked_at: string | null }>`SELECT name,
          last_seen_at, revoked_at FROM connections WHERE id = ${settled.claimant} AND user_id = ${caller.userId}`
        claimant = {
          connection_id: settled.claimant,
          connection_short: connectionShort(settled.claimant),
          agent_name: rows[0]?.name ?? "",
          last_seen_at: rows[0]?.last_seen_at ?? null,
          revoked: rows.length === 0 || rows[0].revoked_at !== null
        }
      }
      return {
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
    }, Effect.catchTag("SqlError", Effect.die))

    /** Events, newest first, with their hashes; page with `before_seq`. */
    const log = Effect.fn("Ledger.log")(function*(
      caller: Caller,
      input: { readonly work_id: string; readonly limit?: number | undefined; readonly before_seq?: number | undefined }
    ) {
      const row = yield* loadWork(caller.userId, input.work_id)
      if (!row) return yield* new NotFound({ what: "work item", id: input.work_id })
      const limit = Math.min(Math.max(input.limit ?? 50, 1), 200)
      const before = input.before_seq ?? Number.MAX_SAFE_INTEGER
      const rows = yield* sql<EventRow>`SELECT work_id, seq, parent, type, data, evidence, actor, at, hash FROM ledger_events
        WHERE user_id = ${caller.userId} AND work_id = ${input.work_id} AND seq < ${before}
        ORDER BY seq DESC LIMIT ${limit + 1}`
      const events = rows.slice(0, limit).map(eventOfRow)
      const more = rows.length > limit
      return {
        work_id: input.work_id,
        head: row.head,
        events,
        next_before_seq: more ? events[events.length - 1].seq : null
      }
    }, Effect.catchTag("SqlError", Effect.die))

    const eventsUpTo = (userId: string, workId: string, seq: number) =>
      sql<EventRow>`SELECT work_id, seq, parent, type, data, evidence, actor, at, hash FROM ledger_events
        WHERE user_id = ${userId} AND work_id = ${workId} AND seq <= ${seq} ORDER BY seq`.pipe(
        Effect.map((rows) => rows.map(eventOfRow))
      )

    /** Field changes (value and evidence, before and after) between two heads of one work item. */
    const diff = Effect.fn("Ledger.diff")(function*(
      caller: Caller,
      input: { readonly work_id: string; readonly from: string; readonly to?: string | undefined }
    ) {
      const row = yield* loadWork(caller.userId, input.work_id)
      if (!row) return yield* new NotFound({ what: "work item", id: input.work_id })
      const seqOf = (hash: string) =>
        Effect.flatMap(
          sql<{ seq: number }>`SELECT seq FROM ledger_events
            WHERE user_id = ${caller.userId} AND work_id = ${input.work_id} AND hash = ${hash}`,
          (rows) => rows.length === 0 ? Effect.fail(new NotFound({ what: "head", id: hash })) : Effect.succeed(Number(rows[0].seq))
        )
      const fromSeq = yield* seqOf(input.from)
      const toHead = input.to ?? row.head
      const toSeq = yield* seqOf(toHead)
      if (fromSeq > toSeq) {
        return yield* new ValidationError({ detail: `from (seq ${fromSeq}) is later than to (seq ${toSeq}); swap them` })
      }
      const events = yield* eventsUpTo(caller.userId, input.work_id, toSeq)
      const before = replay(events.slice(0, fromSeq)).state!
      const beforeFields = { ...before.fields }
      const beforeStatus = { status: before.status, claimant: before.claimant }
      let after: Working = before
      for (const e of events.slice(fromSeq)) {
        const applied = applyEvent(after, e)
        if ("refusal" in applied) return yield* Effect.die(new Error(`ledger ${input.work_id} does not replay at seq ${e.seq}`))
        after = applied.state
      }
      const names = [...new Set([...Object.keys(beforeFields), ...Object.keys(after.fields)])].sort()
      const changes = names
        .filter((n) => beforeFields[n]?.seq !== after.fields[n]?.seq)
        .map((n) => ({ field: n, before: beforeFields[n] ?? null, after: after.fields[n] ?? null }))
      return {
        work_id: input.work_id,
        from: { head: input.from, seq: fromSeq },
        to: { head: toHead, seq: toSeq },
        events: toSeq - fromSeq,
        status: { before: beforeStatus.status, after: after.status },
        claimant: { before: beforeStatus.claimant, after: after.claimant },
        changes
      }
    }, Effect.catchTag("SqlError", Effect.die))

    /**
     * Recompute every hash and every state from scratch, item by item, and compare with what the
     * tables hold (head, seq, settled state). Reports the first break.
     */
    const verify = Effect.fn("Ledger.verify")(function*(options: { readonly userId?: string | undefined } = {}) {
      const items = options.userId === undefined
        ? yield* sql<{ user_id: string; work_id: string }>`SELECT user_id, work_id FROM ledger_work
            UNION SELECT DISTINCT user_id, work_id FROM ledger_events ORDER BY user_id, work_id`
        : yield* sql<{ user_id: string; work_id: string }>`SELECT user_id, work_id FROM ledger_work WHERE user_id = ${options.userId}
            UNION SELECT DISTINCT user_id, work_id FROM ledger_events WHERE user_id = ${options.userId}
            ORDER BY user_id, work_id`
      let count = 0
      for (const item of items) {
        const rows = yield* sql<EventRow>`SELECT work_id, seq, parent, type, data, evidence, actor, at, hash FROM ledger_events
          WHERE user_id = ${item.user_id} AND work_id = ${item.work_id} ORDER BY seq`
        count += rows.length
        const at = (b: ChainBreak): VerifyReport => ({
          ok: false,
          work_items: items.length,
          events: count,
          first_break: { user_id: item.user_id, work_id: item.work_id, ...b }
        })
        let events: Array<LedgerEvent>
        try {
          events = rows.map(eventOfRow)
        } catch {
          return at({ seq: 0, reason: "an event's data is not JSON" })
        }
        const replayed = replay(events)
        if (replayed.break) return at(replayed.break)
        const stored = yield* loadState(item.user_id, item.work_id)
        if (!stored || !replayed.state) return at({ seq: events.length, reason: "work item has no head row or no events" })
        const fromScratch = stateHash(settle(replayed.state))
        const materialized = stateHash(stored)
        if (stored.head !== replayed.state.head) {
          return at({ seq: replayed.state.seq, reason: "head row does not match the last event", expected: replayed.state.head, actual: stored.head })
        }
        if (fromScratch !== materialized) {
          return at({ seq: replayed.state.seq, reason: "settled state differs from the replayed state", expected: fromScratch, actual: materialized })
        }
      }
      return { ok: true, work_items: items.length, events: count, first_break: null } satisfies VerifyReport
    }, Effect.orDie)

    /** Every event of one work item, oldest first (for replay and tests). */
    const events = Effect.fn("Ledger.events")(function*(userId: string, workId: string) {
      return yield* eventsUpTo(userId, workId, Number.MAX_SAFE_INTEGER)
    }, Effect.orDie)

    /** The materialized settled state (from the tables), or none. */
    const state = Effect.fn("Ledger.state")(function*(userId: string, workId: string) {
      return yield* loadState(userId, workId)
    }, Effect.orDie)

    /**
     * What the server witnessed itself becomes `observed` evidence on the work item it concerns, inside
     * the transaction that witnessed it. Nothing to observe (no such item) is not an error; a failed
     * observation is logged and never blocks the write that triggered it.
     */
    const witness = (userId: string, workId: string, field: string, value: unknown, source: string) =>
      observe(userId, workId, field, value, source).pipe(
        Effect.asVoid,
        Effect.catchTag("NotFound", () => Effect.void),
        Effect.catchAll((e) => Effect.logWarning(`could not record observed ${field} on ${workId}`, e))
      )

    // a closeout on the item's `arc:<work_id>` channel
    yield* coordination.onPost((post) =>
      post.kind === "closeout" && post.channel.startsWith("arc:")
        ? witness(post.user_id, post.channel.slice(4), "closeout", {
          post_id: post.post_id,
          by: post.author,
          channel_archived: post.archived
        }, `post ${post.post_id}`)
        : Effect.void
    )
    // the claimant's connection revoked
    yield* auth.onRevoke((revoked) =>
      Effect.gen(function*() {
        const items = yield* sql<{ work_id: string }>`SELECT work_id FROM ledger_work
          WHERE user_id = ${revoked.userId} AND claimant = ${revoked.connectionId} AND status <> 'closed'`
        for (const item of items) {
          yield* witness(revoked.userId, item.work_id, "claimant_revoked", {
            connection_id: revoked.connectionId,
            at: revoked.at
          }, `connection ${revoked.connectionId} revoked`)
        }
      }).pipe(Effect.orDie)
    )

    return { append, observe, witness, requestReview, giveVerdict, status, log, diff, verify, events, state } as const
  })
}) {}
