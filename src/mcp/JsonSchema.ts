import { JSONSchema, Schema } from "effect"

type Json = { [key: string]: unknown }

/** Replace every `$ref` into `$defs` by the definition itself (our schemas are never recursive). */
const inline = (node: unknown, defs: Record<string, unknown>): unknown => {
  if (Array.isArray(node)) return node.map((n) => inline(n, defs))
  if (typeof node !== "object" || node === null) return node
  const obj = node as Json
  if (typeof obj.$ref === "string" && obj.$ref.startsWith("#/$defs/")) {
    const { $ref, ...rest } = obj
    const target = defs[decodeURIComponent(($ref as string).slice("#/$defs/".length))]
    return inline({ ...(target as Json), ...rest }, defs)
  }
  const out: Json = {}
  for (const [k, v] of Object.entries(obj)) {
    // Effect marks `unknown`/`object` schemas with `$id: "/schemas/unknown"`; repeated ids break
    // validators (ajv: "resolves to more than one schema"), and they say nothing to a client
    if (k === "$id") continue
    out[k] = inline(v, defs)
  }
  return out
}

/**
 * The JSON Schema of an Effect Schema as MCP clients want it: no `$schema`, no `$ref`/`$defs`
 * (several clients do not resolve references), no `$id`.
 */
export const toJsonSchema = (schema: Schema.Schema<any, any, never>): Json => {
  const { $schema: _schema, $defs, ...root } = JSONSchema.make(schema) as unknown as Json
  return inline(root, ($defs ?? {}) as Record<string, unknown>) as Json
}
