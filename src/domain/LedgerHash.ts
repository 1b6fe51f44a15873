import canonicalize from "canonicalize"
import * as crypto from "node:crypto"
import type { LedgerEvent, WorkState } from "./Ledger.js"
import { LEDGER_HASH_DOMAIN } from "./Ledger.js"

/**
 * The ledger's canonical hashing: RFC 8785 JSON of an event or a state, and the chained sha256 of an
 * event. The append (services/ledger/Commit.ts) and the replays (LedgerReplay.ts) hash with these, so a
 * hash written is exactly the hash recomputed.
 */

/** RFC 8785 canonical JSON (the `canonicalize` package). */
export const jcs = (value: unknown): string => {
  const out = canonicalize(value)
  if (out === undefined) throw new Error("value has no JSON form")
  return out
}

/** `JSON.stringify` of a string when that is also its JCS form (JCS refuses lone surrogates): else undefined. */
export const jsonString = (s: unknown): string | undefined => {
  if (typeof s !== "string") return undefined
  const out = JSON.stringify(s)
  // a lone surrogate is the only thing JSON.stringify writes as \udXXX (a false alarm only costs the slow path)
  return out.includes("\\ud") ? undefined : out
}

/** The hashed members of an event, in JCS order (UTF-16 code units). */
const ENVELOPE_KEYS = ["actor", "at", "data", "evidence", "parent", "seq", "type", "work_id"] as const

/** The JCS text of an event from its members' JSON texts, written in that fixed order (`ENVELOPE_KEYS`). */
export const eventText = (
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

export const sha256Event = (parent: string | null, text: string): string => sha256Hex(LEDGER_HASH_DOMAIN + (parent ?? "") + text)

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
