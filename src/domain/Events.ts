import { Schema } from "effect"
import type { WaitCycle } from "./Waits.js"

/**
 * Domain events: what a write witnessed, published by the service that made the write, inside that
 * write's transaction (see `services/Events.ts`). Subscribers are wired in one place, where the layers
 * are composed (`layers/App.ts`), never registered from a service's constructor.
 */

/** A post was written (its channel lifecycle already applied). */
export class PostLanded extends Schema.TaggedClass<PostLanded>()("PostLanded", {
  user_id: Schema.String,
  post_id: Schema.String,
  channel: Schema.String,
  channel_seq: Schema.Number,
  kind: Schema.String,
  /** the authoring connection */
  author: Schema.String,
  to_connection_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  /** the channel is archived after this post */
  archived: Schema.Boolean
}) {}

/**
 * A connection was minted (its row written, its bearer not yet shown). `backlog`: it was asked to start with
 * the history unread; otherwise it starts caught up (Coordination records where it starts).
 */
export class ConnectionCreated extends Schema.TaggedClass<ConnectionCreated>()("ConnectionCreated", {
  user_id: Schema.String,
  connection_id: Schema.String,
  backlog: Schema.Boolean,
  at: Schema.String
}) {}

/** A connection's bearer was revoked. */
export class ConnectionRevoked extends Schema.TaggedClass<ConnectionRevoked>()("ConnectionRevoked", {
  user_id: Schema.String,
  connection_id: Schema.String,
  at: Schema.String
}) {}

/**
 * A live connection went silent: no call and no beacon for `SOPHIA_SILENT_AFTER_S` (the sweep notices it, once per
 * silence: a call after it and a new silence is another). Its claims and leases are orphaned from then on.
 */
export class ConnectionSilent extends Schema.TaggedClass<ConnectionSilent>()("ConnectionSilent", {
  user_id: Schema.String,
  connection_id: Schema.String,
  /** when it was last seen (its creation if never) */
  since: Schema.String,
  at: Schema.String
}) {}

/** A wait left `open` with one of the three resolutions (cancellations are not resolutions). */
export class WaitResolved extends Schema.TaggedClass<WaitResolved>()("WaitResolved", {
  user_id: Schema.String,
  wait_id: Schema.String,
  /** the channel its predicate reads */
  channel: Schema.String,
  resolution: Schema.Literal("satisfied", "unsatisfied", "unverifiable"),
  resolved_by: Schema.NullOr(Schema.String),
  waiter: Schema.String,
  at: Schema.String
}) {}

/**
 * A gated call created a pending approval: the owner's channel has something new to decide (the portal's
 * approvals page refreshes on it). A call that finds its binding's approval already open publishes nothing.
 */
export class ApprovalRequested extends Schema.TaggedClass<ApprovalRequested>()("ApprovalRequested", {
  user_id: Schema.String,
  approval_id: Schema.String,
  /** the connection whose call waits for the decision */
  connection_id: Schema.String,
  tool: Schema.String,
  access: Schema.String,
  at: Schema.String
}) {}

/** The owner (or elicitation) decided a pending approval. */
export class ApprovalDecided extends Schema.TaggedClass<ApprovalDecided>()("ApprovalDecided", {
  user_id: Schema.String,
  approval_id: Schema.String,
  connection_id: Schema.String,
  status: Schema.Literal("approved", "denied"),
  via: Schema.String,
  at: Schema.String
}) {}

/** A work item's head moved (an append by an agent or an observation by the server). */
export class LedgerAppended extends Schema.TaggedClass<LedgerAppended>()("LedgerAppended", {
  user_id: Schema.String,
  work_id: Schema.String,
  head: Schema.String,
  seq: Schema.Number,
  types: Schema.Array(Schema.String)
}) {}

/**
 * A user's documents or facts changed (added, imported, deleted or restored): their full-text index has work
 * to do (the search index feed catches the user up shortly after the commit; services/Search.ts).
 */
export class KnowledgeChanged extends Schema.TaggedClass<KnowledgeChanged>()("KnowledgeChanged", {
  user_id: Schema.String
}) {}

/**
 * A lease was granted, renewed or ended (released by its holder or the owner, expired, taken over by another
 * connection): a `lease_free` wait may hold now, a `lease_acquire` long poll may be granted.
 */
export class LeaseChanged extends Schema.TaggedClass<LeaseChanged>()("LeaseChanged", {
  user_id: Schema.String,
  lease_id: Schema.String,
  /** the holder */
  connection_id: Schema.String,
  project: Schema.String,
  resources: Schema.Array(Schema.String),
  change: Schema.Literal("granted", "renewed", "released", "expired", "taken_over"),
  at: Schema.String
}) {}

export const DomainEvent = Schema.Union(
  PostLanded,
  ConnectionCreated,
  ConnectionRevoked,
  ConnectionSilent,
  WaitResolved,
  ApprovalRequested,
  ApprovalDecided,
  LedgerAppended,
  KnowledgeChanged,
  LeaseChanged
)
export type DomainEvent = typeof DomainEvent.Type
export type DomainEventTag = DomainEvent["_tag"]
export type DomainEventOf<T extends DomainEventTag> = Extract<DomainEvent, { readonly _tag: T }>

/**
 * What a `refusing` subscriber may refuse a write with, by the event it hears (services/Events.ts): a lease
 * granted whose new holder waits, directly or not, on a waiter the lease now stands in the way of.
 */
export interface EventRefusals {
  readonly LeaseChanged: WaitCycle
}
export type RefusalOf<T extends DomainEventTag> = T extends keyof EventRefusals ? EventRefusals[T] : never
