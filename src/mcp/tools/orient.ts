import { Effect } from "effect"
import { OrientInput, OrientOutput } from "../../domain/Orient.js"
import { Catalog } from "../Catalog.js"
import { Orient } from "../../services/Orient.js"
import { defineTool, READ_ONLY } from "../Registry.js"

/** `sophia.orient`: one call that bootstraps a session. */
export const orientTools = Effect.gen(function*() {
  const orient = yield* Orient
  const catalog = yield* Catalog
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
      handler: (input, { caller, registry }) => orient.orient(caller, input, catalog.summary(registry, caller.profile))
    })
  ]
})
