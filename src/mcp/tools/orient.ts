import { Effect, Schema } from "effect"
import { BlockingItem } from "../../domain/Envelope.js"
import { Catalog } from "../Catalog.js"
import { Orient } from "../../services/Orient.js"
import { Waits } from "../../services/Waits.js"
import { Coordination } from "../../services/Coordination.js"
import { defineTool, READ_ONLY } from "../Registry.js"

export const OrientInput = Schema.Struct({
  goal: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))).annotations({
    description: "what you are about to do (echoed back)"
  })
})

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
    documents: Schema.Number
  }),
  unread: Schema.Number,
  my_open_waits: Schema.Array(BlockingItem),
  my_claimed_work: Schema.Array(Schema.Struct({
    work_id: Schema.String,
    title: Schema.String,
    status: Schema.String,
    head: Schema.String,
    seq: Schema.Number
  })),
  total_tools: Schema.Number,
  version_hash: Schema.String,
  server_git_sha: Schema.String
})

/** `sophia.orient`: one call that bootstraps a session. */
export const orientTools = Effect.gen(function*() {
  const orient = yield* Orient
  const catalog = yield* Catalog
  const waits = yield* Waits
  const coordination = yield* Coordination
  return [
    defineTool({
      name: "sophia.orient",
      group: "orient",
      access: "read",
      description: "Bootstrap a session in one call: who you are, counts, your unread, open waits and claimed work, " +
        "the tool count and build.",
      annotations: READ_ONLY,
      input: OrientInput,
      output: OrientOutput,
      handler: (input, { caller, registry }) =>
        Effect.gen(function*() {
          const { claimed, counts } = yield* orient.overview(caller)
          // read the caller's waits without consuming a resolution signal: the envelope delivers those
          const { blocking } = yield* waits.signals(caller, false)
          const unread = yield* coordination.unreadCount(caller)
          const summary = catalog.summary(registry, caller.profile)
          return {
            connection_id: caller.connectionId,
            connection_short: caller.connectionShort,
            name: caller.name,
            profile: caller.profile,
            user_id: caller.userId,
            entity_scope: caller.entityScope,
            ...(input.goal !== undefined ? { goal: input.goal } : {}),
            counts,
            unread,
            my_open_waits: blocking,
            my_claimed_work: claimed,
            total_tools: summary.total_tools,
            version_hash: summary.version_hash,
            server_git_sha: summary.server_git_sha
          }
        })
    })
  ]
})
