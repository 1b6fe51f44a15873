import { Effect, Schema } from "effect"
import { defineTool, READ_ONLY } from "../Registry.js"

export const OrientInput = Schema.Struct({
  goal: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))).annotations({
    description: "what you are about to do (echoed back; helps later tools focus)"
  })
})

export const OrientOutput = Schema.Struct({
  connection_id: Schema.String,
  connection_short: Schema.String,
  name: Schema.String,
  profile: Schema.String,
  user_id: Schema.String,
  goal: Schema.optional(Schema.String)
})

/** `sophia.orient`: who you are. Later issues add counts, open waits and claimed work. */
export const orientTools = Effect.succeed([
  defineTool({
    name: "sophia.orient",
    group: "orient",
    access: "read",
    description: "Bootstrap a session: who you are (connection id, short id, name, profile, user).",
    annotations: READ_ONLY,
    input: OrientInput,
    output: OrientOutput,
    handler: (input, { caller }) =>
      Effect.succeed({
        connection_id: caller.connectionId,
        connection_short: caller.connectionShort,
        name: caller.name,
        profile: caller.profile,
        user_id: caller.userId,
        ...(input.goal !== undefined ? { goal: input.goal } : {})
      })
  })
])
