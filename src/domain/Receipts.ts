import { Schema } from "effect"

/**
 * Receipts: who has had a post. A read mark records how it was written (`via`): a read of the inbox tool,
 * a hook of an agent runtime that delivered it, or an MCP resource read.
 */

export const ReadVia = Schema.Literal("inbox", "hook", "resource")
export type ReadVia = typeof ReadVia.Type

export const PostReceiptsInput = Schema.Struct({ post_id: Schema.String })
export type PostReceiptsInput = typeof PostReceiptsInput.Type

export const Recipient = Schema.Struct({
  connection_id: Schema.String,
  agent_name: Schema.String,
  read_at: Schema.NullOr(Schema.String),
  via: Schema.NullOr(ReadVia)
})
export type Recipient = typeof Recipient.Type

/** Every connection that has read the post, and its target (`to`) even before it has: `read_at` and `via` null. */
export const PostReceiptsResult = Schema.Struct({
  post_id: Schema.String,
  recipients: Schema.Array(Recipient)
})
export type PostReceiptsResult = typeof PostReceiptsResult.Type

/** Whether a targeted post reached its target: when and how, or not yet (both null). The owner's portal shows it. */
export interface TargetReceipt {
  readonly read_at: string | null
  readonly via: ReadVia | null
}
