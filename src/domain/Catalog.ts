import { Schema } from "effect"
import { AccessClass } from "./Auth.js"

/** A JSON Schema as advertised (an opaque JSON object to the catalog). */
const JsonSchemaObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const ToolAnnotationsSchema = Schema.Struct({
  readOnlyHint: Schema.Boolean,
  destructiveHint: Schema.Boolean,
  idempotentHint: Schema.Boolean,
  openWorldHint: Schema.Boolean
})

/** One tool as the catalog describes it. */
export const CatalogTool = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  access: AccessClass,
  annotations: ToolAnnotationsSchema,
  input_schema: Schema.optional(JsonSchemaObject),
  output_schema: Schema.optional(JsonSchemaObject)
})
export type CatalogTool = typeof CatalogTool.Type

export const CatalogInput = Schema.Struct({
  brief: Schema.optional(Schema.Boolean).annotations({ description: "omit input/output schemas (much smaller)" }),
  group: Schema.optional(Schema.String).annotations({ description: "only this capability group" })
})
export type CatalogInput = typeof CatalogInput.Type

export const CatalogOutput = Schema.Struct({
  groups: Schema.Record({ key: Schema.String, value: Schema.Array(CatalogTool) }).annotations({
    description: "capability group → its tools"
  }),
  total_tools: Schema.Number.annotations({ description: "tools you may call" }),
  version_hash: Schema.String.annotations({
    description: "SHA-256 of your surface (names, schemas, access, annotations)"
  }),
  server_git_sha: Schema.String.annotations({ description: "git commit of the running build, or unknown" }),
  ledger_contract_hash: Schema.String.annotations({ description: "hash of the frozen ledger event contract" })
})
export type CatalogOutput = typeof CatalogOutput.Type

export const SdkTypesInput = Schema.Struct({})

export const SdkTypesOutput = Schema.Struct({
  declarations: Schema.String.annotations({ description: "ambient TypeScript: declare namespace sophia { … }" }),
  version_hash: Schema.String
})
export type SdkTypesOutput = typeof SdkTypesOutput.Type
