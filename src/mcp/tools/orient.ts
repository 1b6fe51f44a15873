import { Effect } from "effect"
import { OrientInput, OrientOutput } from "../../domain/Orient.js"
import { PanoramaInput, PanoramaOutput } from "../../domain/Panorama.js"
import { SEARCH_ITEM_COMPACT, SearchInput, SearchItem, SearchOutput } from "../../domain/Search.js"
import { Search } from "../../services/Search.js"
import { Catalog } from "../Catalog.js"
import { Orient } from "../../services/Orient.js"
import { ReadModel } from "../../services/readmodel/ReadModel.js"
import { defineTool, READ_ONLY } from "../Registry.js"

/** `sophia.orient` and `sophia.panorama`: the session bootloaders (who you are; who else is there); `sophia.search`. */
export const orientTools = Effect.gen(function*() {
  const orient = yield* Orient
  const catalog = yield* Catalog
  const search = yield* Search
  const readModel = yield* ReadModel
  return [
    defineTool({
      name: "sophia.orient",
      group: "orient",
      access: "read",
      description: "Bootstrap a session in one call: who you are, counts, unread, your waits and work.",
      annotations: READ_ONLY,
      input: OrientInput,
      output: OrientOutput,
      handler: (input, { caller, registry }) => orient.orient(caller, input, catalog.summary(registry, caller.profile))
    }),
    defineTool({
      name: "sophia.panorama",
      group: "orient",
      access: "read",
      description: "The fleet at a glance: live agents (claims, waits, leases), recent channels' latest decision, orphans, your approvals.",
      annotations: READ_ONLY,
      input: PanoramaInput,
      output: PanoramaOutput,
      handler: (input, { caller }) => readModel.panorama(caller, input)
    }),
    defineTool({
      name: "sophia.search",
      group: "orient",
      access: "read",
      description: "Search documents, facts and posts (BM25 + dense if configured, RRF-fused). Posts are grounding: false.",
      annotations: READ_ONLY,
      input: SearchInput,
      output: SearchOutput,
      projection: { key: "items", row: SearchItem, compact: SEARCH_ITEM_COMPACT, compactPreview: { snippet: 120 } },
      handler: (input, { caller }) => search.search(caller, input)
    })
  ]
})
