import canonicalize from "canonicalize"
import * as crypto from "node:crypto"
import { ValidationError } from "./Errors.js"
import { CLAIM_TAKEOVER_FIELD } from "./Orphans.js"
import type { AppendEvent, Evidence, LedgerEvent, ReviewState, SettledField, WorkState } from "./Ledger.js"
import { EvidenceDowngrade, evidenceRank, InvalidTransition, LEDGER_HASH_DOMAIN, SelfCertification } from "./Ledger.js"

/**
 * The ledger's pure core: canonical hashing, the fold of one event onto a state, and the replay of a
 * whole chain. The same code validates an append (services/Ledger.ts) and verifies a stored history
 * (`sophia ledger verify`), so what was accepted is exactly what replays.
 */

/** The settled field an approving verdict writes (with `verified` evidence); agents cannot assert it. */
export const REVIEW_FIELD = "review"

/** RFC 8785 canonical JSON (the `canonicalize` package). */
export const jcs = (value: unknown): string => {
  const out = canonicalize(value)
  if (out === undefined) throw new Error("value has no JSON form")
  return out
}

/** `JSON.stringify` of a string when that is also its JCS form (JCS refuses lone surrogates): else undefined. */
const jsonString = (s: unknown): string | undefined => {
  if (typeof s !== "string") return undefined
  const out = JSON.stringify(s)
  // a lone surrogate is the only thing JSON.stringify writes as \udXXX (a false alarm only costs the slow path)
  return out.includes("\\ud") ? undefined : out
}

/** The hashed members of an event, in JCS order (UTF-16 code units). */
const ENVELOPE_KEYS = ["actor", "at", "data", "evidence", "parent", "seq", "type", "work_id"] as const

/** The JCS text of an event from its members' JSON texts, written in that fixed order (`ENVELOPE_KEYS`). */
const eventText = (
  actor: string,
  at: string,
  data: string,
  evidence: string,
  parent: string,
  seq: string | number,
  type: string,
  workId: string
) => `{"actor":${actor},"at":${at},"data":${data},"evidence":${evidence},"parent":${parent},"seq":${seq},"type":${type},"work_id":${workId}}`

/**
 * The JCS of an event without its hash, as a function of the JCS of its data — when the event is a
 * plain object holding exactly the hashed members, every one but `data` a plain string (or null parent,
 * finite seq): then its canonical text is the members' concatenation in their fixed sorted order, and
 * taking the JCS of the data alone is all `jcs(event)` would do beyond this. Undefined otherwise (the
 * caller takes `jcs(event)`, which also throws exactly what it throws). Checking the other members first
 * keeps that so: `jcs(event)` meets `actor` and `at` before `data`, and nothing after `data` can throw here.
 */
const envelopeOf = (event: Omit<LedgerEvent, "hash">): ((dataJcs: string) => string) | undefined => {
  if (Object.getPrototypeOf(event) !== Object.prototype) return undefined
  const keys = Object.keys(event)
  if (keys.length !== ENVELOPE_KEYS.length) return undefined
  for (const k of ENVELOPE_KEYS) if (!Object.hasOwn(event, k)) return undefined
  const data: unknown = event.data
  const actor = jsonString(event.actor)
  const at = jsonString(event.at)
  const evidence = jsonString(event.evidence)
  const parent = event.parent === null ? "null" : jsonString(event.parent)
  const type = jsonString(event.type)
  const workId = jsonString(event.work_id)
  if (
    // (a `toJSON` on the data itself: `jcs` of it alone may refuse what inside the event it writes)
    typeof data !== "object" || typeof (data as { toJSON?: unknown } | null)?.toJSON === "function" ||
    actor === undefined || at === undefined || evidence === undefined ||
    parent === undefined || type === undefined || workId === undefined || typeof event.seq !== "number" ||
    !Number.isFinite(event.seq)
  ) return undefined
  const seq = JSON.stringify(event.seq)
  return (dataJcs) => eventText(actor, at, dataJcs, evidence, parent, seq, type, workId)
}

/** sha256 hex of a string (UTF-8): Node's one-shot `crypto.hash` where it exists (20.12+), else a Hash object. */
const sha256Hex: (text: string) => string = typeof crypto.hash === "function"
  ? (text) => crypto.hash("sha256", text, "hex")
  : (text) => crypto.createHash("sha256").update(text).digest("hex")

const sha256Event = (parent: string | null, text: string): string => sha256Hex(LEDGER_HASH_DOMAIN + (parent ?? "") + text)

/** `sha256("sophia-ledger-v1\0" ‖ parent ‖ JCS(event without hash))`, hex. */
export const eventHash = (event: Omit<LedgerEvent, "hash">): string => {
  const envelope = envelopeOf(event)
  return sha256Event(event.parent, envelope === undefined ? jcs(event) : envelope(jcs(event.data)))
}

/**
 * An event's hash and the JCS of its data (what the store keeps in `data`), canonicalizing the data
 * once. Throws what `jcs` throws, for the event or for its data.
 */
export const hashAndData = (event: Omit<LedgerEvent, "hash">): { readonly hash: string; readonly data: string } => {
  const envelope = envelopeOf(event)
  if (envelope === undefined) return { hash: sha256Event(event.parent, jcs(event)), data: jcs(event.data) }
  const data = jcs(event.data)
  return { hash: sha256Event(event.parent, envelope(data)), data }
}

/**
 * Whether `text`, which `JSON.parse` read as `value`, is already `jcs(value)`: `JSON.stringify` writes
 * parsed JSON exactly as JCS does (same numbers, same string escapes, no whitespace) except for the
 * order of keys, which JCS sorts by UTF-16 code units, and lone surrogates, which JCS refuses. So the
 * text is canonical when stringify gives it back, every object's keys are already in sorted order, and
 * it holds no escaped lone surrogate. Iterative: a deep value cannot overflow the stack.
 */
export const isCanonicalJson = (text: string, value: unknown): boolean => {
  if (text.includes("\\ud") || JSON.stringify(value) !== text) return false
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (v === null || typeof v !== "object") continue
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push(v[i])
      continue
    }
    const keys = Object.keys(v)
    for (let i = 0; i < keys.length; i++) {
      if (i > 0 && !(keys[i - 1] < keys[i])) return false
      stack.push((v as Record<string, unknown>)[keys[i]])
    }
  }
  return true
}

/** The hash of a settled state: equal states, equal hashes, however they were reached. */
export const stateHash = (state: WorkState): string => sha256Hex(jcs(state))

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

/**
 * A row of `ledger_events` as the store returns it (columns not yet decoded), as an array of its values in
 * the order of `STORED_EVENT_COLUMNS` (verify reads a long chain so: no object per row).
 */
export type StoredEventValues = readonly [
  work_id: unknown,
  seq: unknown,
  parent: unknown,
  type: unknown,
  data: unknown,
  evidence: unknown,
  actor: unknown,
  at: unknown,
  hash: unknown
]
/** The columns of `ledger_events` a `StoredEventValues` holds, in its order. */
export const STORED_EVENT_COLUMNS = "work_id, seq, parent, type, data, evidence, actor, at, hash"

const isString = (v: unknown): v is string => typeof v === "string"
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
/** `o` has exactly the own keys `keys` (JSON.parse makes plain objects: own, enumerable, no prototype tricks). */
const hasExactly = (o: Record<string, unknown>, keys: ReadonlyArray<string>): boolean => {
  if (Object.keys(o).length !== keys.length) return false
  for (const k of keys) if (!Object.hasOwn(o, k)) return false
  return true
}
const VERDICTS = new Set<unknown>(["approved", "changes_requested", "rejected"])

/** Whether `data` is exactly (no member more, none missing) the data of a `type` event of the contract. */
const plainData = (type: LedgerEvent["type"], d: Record<string, unknown>): boolean => {
  switch (type) {
    case "opened":
      return hasExactly(d, ["title"]) && isString(d.title)
    case "claimed":
    case "released":
      return hasExactly(d, [])
    case "asserted":
      return hasExactly(d, ["field", "value"]) && isString(d.field)
    case "observed":
      return hasExactly(d, ["field", "value", "source"]) && isString(d.field) && isString(d.source)
    case "review_requested": {
      const a = d.artifact
      return hasExactly(d, ["request_id", "artifact", "reviewer"]) && isString(d.request_id) &&
        (d.reviewer === null || isString(d.reviewer)) && isRecord(a) && hasExactly(a, ["uri", "sha256"]) &&
        isString(a.uri) && isString(a.sha256)
    }
    case "review_verdict":
      return hasExactly(d, ["request_id", "verdict", "artifact_sha256", "notes"]) && isString(d.request_id) &&
        VERDICTS.has(d.verdict) && isString(d.artifact_sha256) && (d.notes === null || isString(d.notes))
    case "closed":
      return hasExactly(d, ["resolution"]) && isString(d.resolution)
  }
}

/** A BIGINT column: a number (SQLite) or its decimal text (Postgres); undefined for anything else. */
const seqOf = (v: unknown): number | undefined =>
  typeof v === "number" ? v : typeof v === "string" && /^[1-9][0-9]{0,14}$/.test(v) ? Number(v) : undefined

/** Where a replay stands after a prefix of a chain: the state so far, the last hash, the last seq. */
export interface ReplayCursor {
  readonly state: Working | null
  readonly parent: string | null
  readonly seq: number
}

export const REPLAY_START: ReplayCursor = { state: null, parent: null, seq: 0 }

/**
 * `replay`, continued over the next rows of a stored chain (read in pages), without the Schema: the
 * cursor after them when every row is plainly in the vocabulary (every column of its kind, data with
 * exactly its type's members — nothing the Schema would strip or refuse), follows on in seq, links to
 * its parent, hashes to what it stores and is a valid transition; undefined at the first thing that is
 * not so. It certifies only a clean chain: whatever it does not certify, the caller checks again the
 * slow, exact way (the Schema and `replay`), so a break is always reported by the code that always
 * reported it. The event it folds is the one the Schema decodes from the row, and its hash is
 * `eventHash` of it: the envelope is written out in its fixed JCS order, and the data column — the JCS
 * of the data, as the append wrote it — is hashed as it stands once `isCanonicalJson` confirms it (else
 * canonicalized again). The cursor's state is updated in place.
 */
export const replayStored = (
  rows: ReadonlyArray<StoredEventValues>,
  cursor: ReplayCursor
): ReplayCursor | undefined => {
  let { parent, seq, state } = cursor
  let parentJson = parent === null ? "null" : jsonString(parent)
  if (parentJson === undefined) return undefined
  // the same work item and (mostly) the same actor row after row: their JSON is written once
  let workId: unknown = undefined
  let workIdJson: string | undefined
  let actor: unknown = undefined
  let actorJson: string | undefined
  for (let i = 0; i < rows.length; i++) {
    const [rowWorkId, rowSeqValue, rowParent, type, rowData, evidence, rowActor, at, hash] = rows[i]
    const rowSeq = seqOf(rowSeqValue)
    if (
      rowSeq !== seq + 1 || rowParent !== parent || !isString(hash) || !isString(type) || !isString(evidence) ||
      !Object.hasOwn(EVIDENCE_OF, type) || !EVIDENCE_OF[type as LedgerEvent["type"]].includes(evidence as Evidence) ||
      !isString(at) || !isString(rowData)
    ) return undefined
    if (rowWorkId !== workId) {
      workId = rowWorkId
      workIdJson = jsonString(workId)
    }
    if (rowActor !== actor) {
      actor = rowActor
      actorJson = jsonString(actor)
    }
    const atJson = jsonString(at)
    if (workIdJson === undefined || actorJson === undefined || atJson === undefined) return undefined
    let data: unknown
    let dataJcs: string
    try {
      data = JSON.parse(rowData)
      if (!isRecord(data) || !plainData(type as LedgerEvent["type"], data)) return undefined
      dataJcs = isCanonicalJson(rowData, data) ? rowData : jcs(data)
    } catch {
      return undefined
    }
    // `type` and `evidence` are literals of the vocabulary (plain ASCII): their JSON is their quoted text
    const text = eventText(actorJson, atJson, dataJcs, `"${evidence}"`, parentJson, rowSeq, `"${type}"`, workIdJson)
    if (sha256Event(parent, text) !== hash) return undefined
    const event = { work_id: workId, seq: rowSeq, parent, type, data, evidence, actor, at, hash } as LedgerEvent
    const applied = applyEvent(state, event)
    if ("refusal" in applied) return undefined
    state = applied.state
    parent = hash
    // a hash that matched is our own sha256 hex: its JSON is the quoted text
    parentJson = `"${hash}"`
    seq = rowSeq
  }
  return { state, parent, seq }
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

