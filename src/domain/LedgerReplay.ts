import type { Evidence, LedgerEvent } from "./Ledger.js"
import type { Working } from "./LedgerCore.js"
import { applyEvent, EVIDENCE_OF } from "./LedgerCore.js"
import { eventHash, eventText, isCanonicalJson, jcs, jsonString, sha256Event } from "./LedgerHash.js"

/**
 * The replay of a stored chain from scratch: seq, parent links, each hash and each transition (the fold
 * of LedgerCore.ts). `replay` takes decoded events and says where a chain breaks; `replayStored` takes
 * the store's rows as they are, in pages, and only certifies a clean chain (`sophia ledger verify`).
 */

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
