import { Schema } from "effect"
import { PostKind } from "./Coordination.js"
import { OrphanReason } from "./Orphans.js"

/**
 * `sophia.panorama`: the fleet at a glance, for an agent starting a session (`orient` says who it is and
 * what it holds; panorama says who else is there). Every live connection of the caller's user (not
 * revoked, not silent) with what it claims, waits on and leases; the channels with a post in the last
 * `since_h` hours with their latest `decision` or `closeout`; the orphans (work, waits and leases whose
 * holder is revoked or silent); the caller's pending approvals. `compact` (the default) keeps the reply
 * within about 1,500 tokens: times are ages ("3m ago"), lists are shortened and what is left out is counted
 * in `more`, never dropped silently.
 */

/** The default window of recent channels, in hours, and its ceiling (30 days). */
export const PANORAMA_SINCE_H_DEFAULT = 24
export const PANORAMA_SINCE_H_MAX = 720

export const PanoramaInput = Schema.Struct({
  since_h: Schema.optional(
    Schema.Number.pipe(Schema.greaterThan(0), Schema.lessThanOrEqualTo(PANORAMA_SINCE_H_MAX))
  ).annotations({
    description: "hours back for recent channels; default 24"
  }),
  compact: Schema.optional(Schema.Boolean).annotations({
    description: "default true: ≤ ~1,500 tokens, cuts counted in more"
  })
})
export type PanoramaInput = typeof PanoramaInput.Type

/**
 * A preview of `text`: whitespace folded, at most `max` characters (UTF-16 units, never half a surrogate
 * pair), ending in "…" when cut.
 */
export const preview = (text: string, max: number): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  if (flat.length <= max) return flat
  let end = Math.max(0, max - 1)
  const code = flat.charCodeAt(end - 1)
  if (code >= 0xd800 && code <= 0xdbff) end--
  return flat.slice(0, end) + "…"
}

/** One live connection: who, how recently seen, and what it holds. */
export const PanoramaConnection = Schema.Struct({
  name: Schema.String,
  connection_short: Schema.optional(Schema.String).annotations({ description: "(whole view only)" }),
  profile: Schema.String,
  last_seen: Schema.NullOr(Schema.String).annotations({
    description: "its last call or beacon: an ISO time, compact an age (\"3m ago\"); null: never seen"
  }),
  claims: Schema.Array(Schema.String).annotations({ description: "work ids it holds the claim on (open items, newest first)" }),
  open_waits: Schema.Number,
  leases: Schema.Array(Schema.String).annotations({ description: "the resources of its active leases" }),
  you: Schema.optional(Schema.Boolean).annotations({ description: "the caller's own connection" })
})
export type PanoramaConnection = typeof PanoramaConnection.Type

/** A channel's latest `decision` or `closeout` (its body cut to a preview ending in "…"). */
export const ChannelLatest = Schema.Struct({
  kind: PostKind,
  channel_seq: Schema.Number,
  agent_name: Schema.String,
  body: Schema.String,
  created_at: Schema.optional(Schema.String).annotations({ description: "(whole view only)" })
})
export type ChannelLatest = typeof ChannelLatest.Type

/** A channel with a recent post (heartbeats alone do not make a channel recent). */
export const RecentChannel = Schema.Struct({
  channel: Schema.String,
  last_seq: Schema.optional(Schema.Number).annotations({ description: "(whole view only)" }),
  last_post_at: Schema.String.annotations({ description: "an ISO time, compact an age (\"3m ago\")" }),
  archived: Schema.optional(Schema.Boolean).annotations({ description: "present (true) when the channel is archived" }),
  latest: Schema.NullOr(ChannelLatest).annotations({
    description: "its latest decision or closeout, however old; null: it has none"
  })
})
export type RecentChannel = typeof RecentChannel.Type

/** When a holder went away: an ISO time, compact an age. */
const Since = Schema.String.annotations({ description: "revoked or last seen: an ISO time, compact an age (\"3m ago\")" })

export const PanoramaOrphans = Schema.Struct({
  work: Schema.Array(Schema.Struct({
    work_id: Schema.String,
    title: Schema.String,
    agent_name: Schema.String,
    reason: OrphanReason,
    since: Since
  })).annotations({ description: "open work whose claimant is gone: claim it with ledger_append { type: \"claimed\" }" }),
  waits: Schema.Array(Schema.Struct({
    wait_id: Schema.String,
    waiter: Schema.String,
    on: Schema.String,
    reason: OrphanReason,
    since: Since
  })).annotations({ description: "open waits on a connection that is gone: nobody will answer them" }),
  leases: Schema.Array(Schema.Struct({
    lease_id: Schema.String,
    resources: Schema.Array(Schema.String),
    agent_name: Schema.String,
    reason: OrphanReason,
    since: Since
  })).annotations({ description: "active leases whose holder is gone: lease_acquire takes them over" })
})
export type PanoramaOrphans = typeof PanoramaOrphans.Type

export const PendingApproval = Schema.Struct({
  approval_id: Schema.String,
  tool: Schema.String,
  created_at: Schema.String.annotations({ description: "an ISO time, compact an age (\"3m ago\")" })
})
export type PendingApproval = typeof PendingApproval.Type

/** How many items `compact` (or a ceiling) left out of each list; a list nothing was cut from is absent. */
export const PanoramaMore = Schema.Struct({
  connections: Schema.optional(Schema.Number),
  channels: Schema.optional(Schema.Number),
  claims: Schema.optional(Schema.Number),
  leases: Schema.optional(Schema.Number),
  orphans: Schema.optional(Schema.Number),
  approvals: Schema.optional(Schema.Number)
})
export type PanoramaMore = typeof PanoramaMore.Type

export const PanoramaOutput = Schema.Struct({
  connections: Schema.Array(PanoramaConnection),
  silent: Schema.Number.annotations({
    description: "connections not revoked but silent (SOPHIA_SILENT_AFTER_S): what they hold is under orphans"
  }),
  channels: Schema.Array(RecentChannel),
  orphans: PanoramaOrphans,
  my_pending_approvals: Schema.Array(PendingApproval),
  more: PanoramaMore.annotations({ description: "what was left out, per list: call again with compact: false for all of it" })
})
export type PanoramaOutput = typeof PanoramaOutput.Type
