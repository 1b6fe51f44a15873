import { Schema } from "effect"
import { BlockingItem } from "./Envelope.js"
import { LeaseRow } from "./Leases.js"
import { WorkSummary } from "./Ledger.js"
import { OrphanedWork } from "./Orphans.js"

/** `sophia.orient`: one call that bootstraps a session. */
export const OrientInput = Schema.Struct({
  goal: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))).annotations({
    description: "echoed back"
  })
})
export type OrientInput = typeof OrientInput.Type

/** The tool surface as the catalog describes it (the MCP side supplies it; orient only reports it). */
export const SurfaceSummary = Schema.Struct({
  total_tools: Schema.Number,
  version_hash: Schema.String,
  server_git_sha: Schema.String
})
export type SurfaceSummary = typeof SurfaceSummary.Type

export const OrientOutput = Schema.Struct({
  connection_id: Schema.String,
  connection_short: Schema.String,
  name: Schema.String,
  profile: Schema.String,
  user_id: Schema.String,
  entity_scope: Schema.Array(Schema.String),
  goal: Schema.optional(Schema.String),
  counts: Schema.Struct({
    posts: Schema.Number,
    channels: Schema.Number,
    open_waits: Schema.Number,
    work_items: Schema.Number,
    documents: Schema.Number,
    /** with an embeddings provider: rows not embedded yet (dense search does not find them until they are) */
    embedding_backlog: Schema.optional(Schema.Number)
  }),
  unread: Schema.Number,
  my_open_waits: Schema.Array(BlockingItem),
  my_claimed_work: Schema.Array(WorkSummary),
  my_leases: Schema.Array(LeaseRow),
  /** claimant revoked or silent: work you may take over (a `claimed` event), waits nobody will answer */
  orphaned: Schema.Struct({ work: Schema.Array(OrphanedWork), waits: Schema.Number }),
  ...SurfaceSummary.fields
})
export type OrientOutput = typeof OrientOutput.Type
