import { Effect } from "effect"
import {
  BeaconInput,
  BeaconResult,
  InboxInput,
  InboxResult,
  POST_ROW_COMPACT,
  PostInput,
  PostReceipt,
  PostRow
} from "../../domain/Coordination.js"
import { Coordination } from "../../services/Coordination.js"
import { APPEND_ONLY, defineTool } from "../Registry.js"

/** `sophia.coordination_post`, `sophia.coordination_inbox`, `sophia.beacon`: thin calls into Coordination. */
export const coordinationTools = Effect.gen(function*() {
  const coordination = yield* Coordination
  return [
    defineTool({
      name: "sophia.coordination_post",
      group: "coordination",
      access: "coordinate",
      description: "Post to a channel (typed kind; author = your connection). `to` targets a connection; " +
        "a closeout on an arc: channel archives it unless closeout.review_requested.",
      annotations: APPEND_ONLY,
      input: PostInput,
      output: PostReceipt,
      handler: (input, { caller }) => coordination.post(caller, input)
    }),
    defineTool({
      name: "sophia.coordination_inbox",
      group: "coordination",
      access: "read",
      description: "Your unread posts, oldest first (marks them read for you unless peek), global unread_count, channels.",
      // marking read changes this connection's read state (nothing else): not read-only, but idempotent
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      input: InboxInput,
      output: InboxResult,
      projection: { key: "posts", row: PostRow, compact: POST_ROW_COMPACT, compactPreview: { body: 100 } },
      handler: (input, { caller }) => coordination.inbox(caller, input)
    }),
    defineTool({
      name: "sophia.beacon",
      group: "coordination",
      access: "coordinate",
      description: "Heartbeat: a heartbeat post (hidden from inboxes by default) and your last-seen time.",
      annotations: APPEND_ONLY,
      input: BeaconInput,
      output: BeaconResult,
      handler: (input, { caller }) => coordination.beacon(caller, input)
    })
  ]
})
