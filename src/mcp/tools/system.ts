import { Effect } from "effect"
import { CatalogInput, CatalogOutput, SdkTypesInput, SdkTypesOutput } from "../../domain/Catalog.js"
import { Catalog } from "../Catalog.js"
import { defineTool, READ_ONLY } from "../Registry.js"

/** `sophia.capability_catalog` and `sophia.get_sdk_types`: the surface describing itself, from the registry. */
export const systemTools = Effect.gen(function*() {
  const catalog = yield* Catalog
  return [
    defineTool({
      name: "sophia.capability_catalog",
      group: "system",
      access: "read",
      description: "Every tool you may call, by capability, with access class and annotations.",
      annotations: READ_ONLY,
      input: CatalogInput,
      output: CatalogOutput,
      handler: (input, { caller, registry }) => catalog.describe(registry, caller, input)
    }),
    defineTool({
      name: "sophia.get_sdk_types",
      group: "system",
      access: "read",
      description: "TypeScript declarations of every tool you may call, as execute_code snippets see them (camelCase).",
      annotations: READ_ONLY,
      input: SdkTypesInput,
      output: SdkTypesOutput,
      handler: (_input, { caller, registry }) => catalog.sdkTypes(registry, caller)
    })
  ]
})
