import type { ConnectionInfo } from "../../domain/Auth.js"
import type { LeaseRow } from "../../domain/Leases.js"
import type { WorkSummary } from "../../domain/Ledger.js"
import type { OrphanedWork } from "../../domain/Orphans.js"
import type {
  PanoramaConnection,
  PanoramaMore,
  PanoramaOrphans,
  PanoramaOutput,
  PendingApproval,
  RecentChannel
} from "../../domain/Panorama.js"
import { preview } from "../../domain/Panorama.js"
import type { OrphanedWait } from "../waits/Graph.js"

/**
 * What `panorama` shows of what the owners said (pure): the rows, and — `compact`, the default — the
 * shortened view that stays within its budget: times as ages ("3m ago"), ids the agent does not need left
 * out, lists cut to a few items, and then whole rows dropped (the least recently active channels first,
 * then the least recently seen connections) until the estimate of its tokens (`estimateTokens`, an upper
 * bound of o200k's count for such JSON) is within `COMPACT_MAX_TOKENS`; every cut counted in `more`.
 * `test/Panorama.test.ts` counts the real tokens for 20 agents and 50 channels.
 */

/** What the read gathered, whole. */
export interface PanoramaParts {
  readonly caller: string
  /** the time of the read (ms): ages are counted from it */
  readonly now: number
  readonly live: ReadonlyArray<ConnectionInfo>
  readonly silent: number
  readonly openWaits: ReadonlyMap<string, number>
  readonly claims: ReadonlyMap<string, ReadonlyArray<WorkSummary>>
  readonly leases: ReadonlyMap<string, ReadonlyArray<LeaseRow>>
  readonly channels: ReadonlyArray<RecentChannel>
  /** recent channels in all (`channels` may hold fewer) */
  readonly channelsTotal: number
  readonly orphanedWork: ReadonlyArray<OrphanedWork>
  readonly orphanedWaits: ReadonlyArray<OrphanedWait>
  readonly names: ReadonlyMap<string, string>
  readonly approvals: ReadonlyArray<PendingApproval>
}

interface Caps {
  readonly connections: number
  readonly claims: number
  readonly leases: number
  readonly orphans: number
  readonly approvals: number
  readonly body: number
  readonly resource: number
}

/** compact: at most this much of each list (and then the whole within `COMPACT_MAX_TOKENS`). */
export const COMPACT_CAPS: Caps = { connections: 20, claims: 3, leases: 3, orphans: 3, approvals: 5, body: 80, resource: 60 }
const WHOLE: Caps = {
  connections: Infinity,
  claims: Infinity,
  leases: Infinity,
  orphans: Infinity,
  approvals: Infinity,
  body: 1000,
  resource: Infinity
}
/** The most recent channels a compact read asks of Coordination (the budget shows fewer). */
export const COMPACT_CHANNELS = 30
/** The most recent channels a whole read lists (more are counted). */
export const WHOLE_CHANNELS = 200
/** compact: the reply's estimated tokens at most (the envelope's fields come on top). */
export const COMPACT_MAX_TOKENS = 1400

/**
 * An estimate of the o200k tokens of `text` that errs high for this JSON (keys, names, ids, ISO times,
 * prose, non-Latin text; 1.0–1.4× the tokenizer's count, measured in test/Panorama.test.ts): a run of
 * ASCII letters a token per 5, of digits or of punctuation per 3, any other character one, a lone space none
 * (it joins the word).
 */
export const estimateTokens = (text: string): number => {
  let n = 0
  let kind = 0 // the current run: 0 none, 1 letters, 2 digits, 3 punctuation, 4 spaces
  let length = 0
  const close = () => {
    if (kind === 1) n += Math.ceil(length / 5)
    else if (kind === 2 || kind === 3) n += Math.ceil(length / 3)
    else if (kind === 4 && length > 1) n += 1
  }
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    const k = c > 0x7f ? 0
      : (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) ? 1
      : c >= 0x30 && c <= 0x39 ? 2
      : c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d ? 4
      : 3
    if (k === kind && k !== 0) {
      length++
      continue
    }
    close()
    if (k === 0) n += 1 // any other character: one token
    kind = k
    length = 1
  }
  close()
  return n
}

/** How long ago `iso` was, in the largest whole unit ("45s ago", "3m ago", "5h ago", "2d ago"). */
export const ageOf = (iso: string, now: number): string => {
  const s = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000))
  if (s < 60) return `${s}s ago`
  if (s < 3600) return `${Math.floor(s / 60)}m ago`
  return s < 86_400 ? `${Math.floor(s / 3600)}h ago` : `${Math.floor(s / 86_400)}d ago`
}

const seenFirst = (a: ConnectionInfo, b: ConnectionInfo) =>
  (b.last_seen_at ?? "").localeCompare(a.last_seen_at ?? "") || a.created_at.localeCompare(b.created_at)

const counted = (more: Record<string, number>, key: keyof PanoramaMore, n: number) => {
  if (n > 0) more[key] = (more[key] ?? 0) + n
}

/** The first `cap` of a list, the rest counted under `key`. */
const capped = <A>(items: ReadonlyArray<A>, cap: number, more: Record<string, number>, key: keyof PanoramaMore): Array<A> => {
  counted(more, key, items.length - cap)
  return items.slice(0, cap)
}

const orphansOf = (
  parts: PanoramaParts,
  caps: Caps,
  when: (iso: string) => string,
  more: Record<string, number>
): PanoramaOrphans => {
  const nameOf = (id: string) => parts.names.get(id) ?? id.slice(0, 8)
  const leases = [...parts.leases.values()].flat().flatMap((l) =>
    l.orphaned === undefined ? [] : [{
      lease_id: l.lease_id,
      resources: l.resources.map((r) => preview(r, caps.resource)),
      agent_name: l.agent_name,
      reason: l.orphaned.reason,
      since: when(l.orphaned.since)
    }]
  )
  return {
    work: capped(parts.orphanedWork, caps.orphans, more, "orphans").map((w) => ({
      work_id: w.work_id,
      title: preview(w.title, caps.body),
      agent_name: nameOf(w.connection_id),
      reason: w.reason,
      since: when(w.since)
    })),
    waits: capped(parts.orphanedWaits, caps.orphans, more, "orphans").map((w) => ({
      wait_id: w.wait_id,
      waiter: nameOf(w.waiter),
      on: nameOf(w.on),
      reason: w.reason,
      since: when(w.since)
    })),
    leases: capped(leases, caps.orphans, more, "orphans")
  }
}

const connectionOf = (parts: PanoramaParts, c: ConnectionInfo, caps: Caps, compact: boolean, more: Record<string, number>) => {
  const claims = (parts.claims.get(c.connection_id) ?? []).map((w) => w.work_id)
  const resources = (parts.leases.get(c.connection_id) ?? []).flatMap((l) => l.resources)
  const row: PanoramaConnection = {
    name: c.name,
    ...(compact ? {} : { connection_short: c.connection_short }),
    profile: c.profile,
    last_seen: c.last_seen_at === null ? null : compact ? ageOf(c.last_seen_at, parts.now) : c.last_seen_at,
    claims: capped(claims, caps.claims, more, "claims"),
    open_waits: parts.openWaits.get(c.connection_id) ?? 0,
    leases: capped(resources, caps.leases, more, "leases").map((r) => preview(r, caps.resource)),
    ...(c.connection_id === parts.caller ? { you: true } : {})
  }
  return row
}

const channelOf = (ch: RecentChannel, caps: Caps, compact: boolean, now: number): RecentChannel =>
  !compact ? ch : {
    channel: ch.channel,
    ...(ch.archived === true ? { archived: true } : {}),
    last_post_at: ageOf(ch.last_post_at, now),
    latest: ch.latest === null ? null : {
      kind: ch.latest.kind,
      channel_seq: ch.latest.channel_seq,
      agent_name: ch.latest.agent_name,
      body: preview(ch.latest.body, caps.body)
    }
  }

/** The reply: whole, or compact within `COMPACT_MAX_TOKENS` (see the module's comment). */
export const panoramaView = (parts: PanoramaParts, compact: boolean): PanoramaOutput => {
  const caps = compact ? COMPACT_CAPS : WHOLE
  const when = (iso: string) => (compact ? ageOf(iso, parts.now) : iso)
  const more: Record<string, number> = {}
  const live = [...parts.live].sort(seenFirst)
  const connections = capped(live, caps.connections, more, "connections").map((c) => connectionOf(parts, c, caps, compact, more))
  const channels = parts.channels.map((ch) => channelOf(ch, caps, compact, parts.now))
  counted(more, "channels", parts.channelsTotal - channels.length)
  const view = {
    connections,
    silent: parts.silent,
    channels,
    orphans: orphansOf(parts, caps, when, more),
    my_pending_approvals: capped(parts.approvals, caps.approvals, more, "approvals")
      .map((a) => ({ ...a, created_at: when(a.created_at) })),
    more
  }
  if (!compact) return view
  // (`more` gains keys as rows go: a few tokens kept aside for them)
  let tokens = estimateTokens(JSON.stringify(view)) + 8
  while (tokens > COMPACT_MAX_TOKENS && channels.length > 0) {
    tokens -= estimateTokens(JSON.stringify(channels.pop())) + 1
    counted(more, "channels", 1)
  }
  while (tokens > COMPACT_MAX_TOKENS && connections.length > 1) {
    // (the caller's own row stays)
    const at = connections.at(-1)?.you === true ? connections.length - 2 : connections.length - 1
    tokens -= estimateTokens(JSON.stringify(connections.splice(at, 1)[0])) + 1
    counted(more, "connections", 1)
  }
  return view
}
