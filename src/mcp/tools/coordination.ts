import { Effect } from "effect"
import {
  BeaconInput,
  BeaconResult,
  inboxInputOf,
  InboxResult,
  POST_ROW_COMPACT,
  postInputOf,
  PostReceipt,
  PostRow
} from "../../domain/Coordination.js"
import { PostReceiptsInput, PostReceiptsResult } from "../../domain/Receipts.js"
import { Coordination } from "../../services/Coordination.js"
import { APPEND_ONLY, defineTool, READ_ONLY } from "../Registry.js"

/**
 * `sophia.coordination_post`, `sophia.coordination_inbox`, `sophia.beacon`, `sophia.post_receipts`: thin calls
 * into Coordination. Their
 * schemas are built from the limits the service enforces (configurable), so they advertise exactly those.
 */
export const coordinationTools = Effect.gen(function*() {
  const coordination = yield* Coordination
  return [
    defineTool({
      name: "sophia.coordination_post",
      group: "coordination",
      access: "coordinate",
      description: "Post to a channel (typed kind; author = your connection). A closeout on an arc: channel " +
        "archives it unless closeout.review_requested.",
      annotations: APPEND_ONLY,
      input: postInputOf(coordination.limits),
      output: PostReceipt,
      handler: (input, { caller }) => coordination.post(caller, input)
    }),
    defineTool({
      name: "sophia.coordination_inbox",
      group: "coordination",
      access: "read",
      description: "Without channel: your unread posts, oldest first. With channel: the conversation (mine/unread " +
        "flagged). Marks returned posts read.",
      // marking read changes this connection's read state (nothing else): not read-only, but idempotent
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      input: inboxInputOf(coordination.limits),
      output: InboxResult,
      projection: { key: "posts", row: PostRow, compact: POST_ROW_COMPACT, compactPreview: { body: 100 } },
      handler: (input, { caller }) => coordination.inbox(caller, input)
    }),
    defineTool({
      name: "sophia.beacon",
      group: "coordination",
      access: "coordinate",
      description: "A heartbeat post (hidden from inboxes by default); updates your last seen.",
      annotations: APPEND_ONLY,
      input: BeaconInput,
      output: BeaconResult,
      handler: (input, { caller }) => coordination.beacon(caller, input)
    }),
    defineTool({
      name: "sophia.post_receipts",
      group: "coordination",
      access: "read",
      description: "Who read your post (read_at, via), and its target even before.",
      annotations: READ_ONLY,
      input: PostReceiptsInput,
      output: PostReceiptsResult,
      handler: (input, { caller }) => coordination.receipts(caller, input.post_id)
    })
  ]
})
