import { Schema } from "effect"
import { JsonObject } from "./Json.js"

/**
 * Coordination: typed posts between the connections of one user, a per-connection inbox, and the
 * lifecycle of `arc:` channels. Posts are NOT facts: they are agent-to-agent chatter and never become
 * grounding for knowledge.
 */

/** The fixed post kinds. The tool's Schema is built from this constant; nothing else lists them. */
export const VALID_POST_KINDS = [
  "question",
  "answer",
  "claim",
  "decision",
  "status",
  "heartbeat",
  "brief",
  "closeout"
] as const
export const PostKind = Schema.Literal(...VALID_POST_KINDS)
export type PostKind = typeof PostKind.Type

/** Channels are free-form text; `arc:<name>` and `branch:<name>` are conventions, not types. */
export const ARC_PREFIX = "arc:"
export const isArcChannel = (channel: string) => channel.startsWith(ARC_PREFIX)

/**
 * The one place the rule lives: the channel `arc:<work_id>` names the ledger's work item `<work_id>`
 * (a closeout or a resolved wait there is observed on that item). Undefined for any other channel.
 */
export const arcWorkId = (channel: string): string | undefined =>
  isArcChannel(channel) && channel.length > ARC_PREFIX.length ? channel.slice(ARC_PREFIX.length) : undefined

export const ChannelName = Schema.String.pipe(
  Schema.minLength(1),
  Schema.maxLength(200),
  Schema.pattern(/\S/, { message: () => "a channel name needs a non-blank character" })
)

export const PostId = Schema.String.pipe(Schema.pattern(/^post-[0-9a-f-]{36}$/), Schema.brand("PostId"))
export type PostId = typeof PostId.Type

/** `closeout.review_requested` is required on every closeout and never inferred. */
export const CloseoutInfo = Schema.Struct({
  review_requested: Schema.Boolean.annotations({
    description: "true: the arc awaits a verdict and stays open"
  })
})
export type CloseoutInfo = typeof CloseoutInfo.Type

/**
 * The limits a post and an inbox read are held to, each configurable (`SOPHIA_POST_BODY_MAX_BYTES`,
 * `SOPHIA_POST_PAYLOAD_MAX_BYTES`, `SOPHIA_POST_PAYLOAD_MAX_DEPTH`, `SOPHIA_POST_REFERENCES_MAX`,
 * `SOPHIA_POST_REFERENCE_MAX_CHARS`, `SOPHIA_INBOX_LIMIT_MAX`). The tools' schemas are built from the limits
 * the service enforces (`postInputOf`, `inboxInputOf`), so what a schema advertises is what is refused.
 */
export interface CoordinationLimits {
  readonly bodyBytes: number
  readonly payloadBytes: number
  readonly payloadDepth: number
  readonly references: number
  readonly referenceChars: number
  readonly inboxLimit: number
}
export const DEFAULT_COORDINATION_LIMITS: CoordinationLimits = {
  bodyBytes: 32 * 1024,
  payloadBytes: 8 * 1024,
  payloadDepth: 8,
  references: 32,
  referenceChars: 512,
  inboxLimit: 200
}

/** A size for a description: "32 KiB" when it is whole KiB, else "N bytes". */
export const sizeText = (bytes: number) => bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`

/**
 * What a caller may post (the tool's arguments). The sizes are the service's to refuse (`payload_too_large`,
 * `coordination/Validation.ts`): the schema advertises them without refusing first. A body of at most N
 * UTF-8 bytes has at most N characters, hence `maxLength`; its description says bytes.
 */
export const postInputOf = (limits: CoordinationLimits) =>
  Schema.Struct({
    channel: ChannelName,
    kind: PostKind,
    body: Schema.String.annotations({
      description: `≤ ${sizeText(limits.bodyBytes)} UTF-8`,
      jsonSchema: { maxLength: limits.bodyBytes }
    }),
    references: Schema.optional(
      Schema.Array(Schema.String.annotations({ jsonSchema: { maxLength: limits.referenceChars } })).annotations({
        jsonSchema: { maxItems: limits.references }
      })
    ).annotations({ description: "pointers at primary sources, never posts" }),
    payload: Schema.optional(JsonObject).annotations({
      description: `≤ ${sizeText(limits.payloadBytes)} JSON, depth ≤ ${limits.payloadDepth}`
    }),
    to: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))).annotations({
      description: "recipient: connection id, short id, or name"
    }),
    closeout: Schema.optional(CloseoutInfo).annotations({ description: "required when kind is closeout" }),
    based_on_seq: Schema.optional(Schema.Int.pipe(Schema.nonNegative())).annotations({
      description: "the last channel_seq you had seen"
    })
  })
export const PostInput = postInputOf(DEFAULT_COORDINATION_LIMITS)
export type PostInput = typeof PostInput.Type

/** The write receipt. */
export const PostReceipt = Schema.Struct({
  post_id: Schema.String,
  channel: Schema.String,
  channel_seq: Schema.Number,
  created_at: Schema.String,
  warning: Schema.optional(Schema.String)
})
export type PostReceipt = typeof PostReceipt.Type

/**
 * The row a write produced, as handed to internal callers (Waits) and post observers. `author` is the
 * authenticated connection; `to_connection_id` the resolved recipient.
 */
/**
 * What `Coordination.post` returns: the receipt (what the tool sends; its output Schema keeps only the
 * receipt's keys) and the channel's archived state after the write, for callers inside the server.
 */
export interface PostWritten extends PostReceipt {
  readonly archived: boolean
}

/** One inbox row. `agent_name` is joined live; `connection_short` never moves. */
export const PostRow = Schema.Struct({
  post_id: Schema.String,
  channel: Schema.String,
  channel_seq: Schema.Number,
  kind: PostKind,
  body: Schema.String,
  references: Schema.Array(Schema.String),
  payload: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  connection_id: Schema.String,
  connection_short: Schema.String,
  agent_name: Schema.String,
  to: Schema.NullOr(Schema.String),
  to_connection_id: Schema.NullOr(Schema.String),
  to_agent_name: Schema.NullOr(Schema.String),
  based_on_seq: Schema.NullOr(Schema.Number),
  behind_by: Schema.NullOr(Schema.Number).annotations({
    description: ">0: composed before that many later posts in the channel (based_on_seq behind)"
  }),
  mine: Schema.Boolean.annotations({ description: "your own post" }),
  unread: Schema.Boolean,
  created_at: Schema.String
})
export type PostRow = typeof PostRow.Type

/** The curated keys of `compact: true` (channel + channel_seq identify a post; `fields` gives any other key). */
export const POST_ROW_COMPACT = ["channel", "channel_seq", "kind", "agent_name", "body"] as const

export const ChannelSummary = Schema.Struct({
  channel: Schema.String,
  last_seq: Schema.Number,
  unread: Schema.Number,
  last_post_at: Schema.String,
  archived: Schema.Boolean
})
export type ChannelSummary = typeof ChannelSummary.Type

/** The longest an inbox read may wait for a post (`wait_s`). */
export const INBOX_WAIT_MAX_S = 60

/** An inbox read's arguments; `limit`'s ceiling is the service's (`SOPHIA_INBOX_LIMIT_MAX`). */
export const inboxInputOf = (limits: Pick<CoordinationLimits, "inboxLimit">) =>
  Schema.Struct({
    channel: Schema.optional(ChannelName).annotations({
      description: "the conversation: newest `limit`, seq order"
    }),
    kinds: Schema.optional(Schema.Array(PostKind)),
    to_me: Schema.optional(Schema.Boolean).annotations({ description: "only posts addressed to you" }),
    limit: Schema.optional(Schema.Int.pipe(Schema.between(1, limits.inboxLimit))).annotations({ description: "default 50" }),
    cursor: Schema.optional(Schema.String).annotations({ description: "from a reply: pages forward" }),
    before_seq: Schema.optional(Schema.Int.pipe(Schema.positive())).annotations({
      description: "with channel: posts before this channel_seq"
    }),
    unread_only: Schema.optional(Schema.Boolean).annotations({
      description: "default: true without channel, false with it"
    }),
    wait_s: Schema.optional(Schema.Number.pipe(Schema.between(0, INBOX_WAIT_MAX_S))).annotations({
      description: "long poll: seconds to wait for a post"
    }),
    include_heartbeats: Schema.optional(Schema.Boolean),
    include_archived: Schema.optional(Schema.Boolean),
    peek: Schema.optional(Schema.Boolean).annotations({ description: "read without marking read" })
  })
export const InboxInput = inboxInputOf(DEFAULT_COORDINATION_LIMITS)
export type InboxInput = typeof InboxInput.Type

export const InboxResult = Schema.Struct({
  posts: Schema.Array(PostRow),
  unread_count: Schema.Number.annotations({ description: "global, not narrowed by channel" }),
  channels: Schema.Array(ChannelSummary),
  cursor: Schema.NullOr(Schema.String)
})
export type InboxResult = typeof InboxResult.Type

export const BeaconInput = Schema.Struct({
  status: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))),
  channel: Schema.optional(ChannelName).annotations({ description: "default `beacon`" })
})
export type BeaconInput = typeof BeaconInput.Type

/** A beacon's receipt is its heartbeat post's receipt plus the connection's new last-seen time. */
export const BeaconResult = Schema.Struct({ ...PostReceipt.fields, last_seen_at: Schema.String })
export type BeaconResult = typeof BeaconResult.Type

export const BEACON_CHANNEL = "beacon"
