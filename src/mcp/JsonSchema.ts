import { JSONSchema, Schema } from "effect"
import { EnvelopeFields } from "../domain/Envelope.js"

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

// What a tool advertises: the JSON Schemas derived from its Schemas, trimmed for tools/list (the registry
// only asks for them)

/** MCP wants `type: "object"` at the root; `Schema.Struct({})` (a tool without arguments) becomes `{}`'s anyOf. */
const objectRoot = (schema: Json): Json =>
  schema.type !== "object" && schema.properties === undefined && Array.isArray(schema.anyOf) &&
    schema.anyOf.every((m: any) => m?.type === "object" || m?.type === "array")
    ? { type: "object", properties: {} }
    : schema

/**
 * The envelope in every outputSchema: all its fields, typed but not spelled out (the server instructions
 * explain them; their full shape is get_sdk_types' `Envelope`). In full, repeated in
 * every tool, it was a third of tools/list.
 */
const slimEnvelope = (envelope: Json): Json => {
  const properties: Record<string, any> = { ...(envelope.properties as object) }
  for (const [k, v] of Object.entries(properties)) properties[k] = { type: v?.type }
  return { ...envelope, properties }
}

/** Effect's stock descriptions of refinements: the constraint keyword beside them already says it. */
const STOCK_DESCRIPTIONS = [
  /^a string at (least|most) \d+ character\(s\)( and at most \d+ character\(s\))? long$/,
  /^a string (matching the pattern|starting with|ending with|including) .+$/s,
  /^an? (integer|finite number|positive number|negative number|non-negative number|non-positive number|number excluding NaN|non empty string|Universally Unique Identifier|string with no leading or trailing whitespace|lowercase string|uppercase string)$/,
  /^a number (greater|less) than (or equal to )?\S+$/,
  /^a number between \S+ and \S+$/,
  /^an array of (at least|at most|exactly) \d+ item\(s\)$/
]

const isEmptyObject = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 0
/** keywords whose values are data, not schemas: never rewritten */
const DATA_KEYWORDS = new Set(["enum", "const", "default", "examples"])

/**
 * tools/list economy (the whole surface must stay ≤ 8k tokens): drop what tells a model nothing —
 * `additionalProperties: false` below the top (a tool's own keys are checked, and its input schema says so at
 * the top: `toolInputJsonSchema`), Effect's generated `title`s and stock
 * descriptions, empty `required`/`properties`, `additionalProperties: {}` — and write a nullable simple type
 * as a type list. Validation keywords are kept.
 */
export const slimJsonSchema = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(slimJsonSchema)
  if (typeof node !== "object" || node === null) return node
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(node)) {
    if (k === "additionalProperties" && v === false) continue
    if (k === "title" && typeof v === "string") continue
    if (k === "required" && Array.isArray(v) && v.length === 0) continue
    if ((k === "properties" || k === "additionalProperties") && isEmptyObject(v)) continue
    if (k === "description" && typeof v === "string" && STOCK_DESCRIPTIONS.some((re) => re.test(v))) continue
    out[k] = DATA_KEYWORDS.has(k)
      ? v
      : k === "properties" || k === "patternProperties"
      ? Object.fromEntries(Object.entries(v as object).map(([name, p]) => [name, slimJsonSchema(p)]))
      : slimJsonSchema(v)
  }
  // Effect writes a refined number as `allOf: [{ type, minimum }]`: one member merges into its parent
  const allOf = out.allOf as Array<Record<string, unknown>> | undefined
  if (Array.isArray(allOf) && allOf.length === 1 && typeof allOf[0] === "object" &&
    Object.keys(allOf[0]).every((k) => !(k in out))) {
    const { allOf: _, ...rest } = out
    return { ...rest, ...allOf[0] }
  }
  const anyOf = out.anyOf as Array<Record<string, unknown>> | undefined
  if (Array.isArray(anyOf) && anyOf.length > 1 && anyOf.every((m) => typeof m.type === "string" && Object.keys(m).length === 1)) {
    const { anyOf: _, ...rest } = out
    return { ...rest, type: anyOf.map((m) => m.type) }
  }
  return out
}

/** The envelope's properties added to every tool's output schema (refusals are `isError` text, not structured). */
const withEnvelope = (schema: Json): Json => {
  const envelope = slimEnvelope(toJsonSchema(EnvelopeFields))
  return {
    ...schema,
    type: "object",
    properties: { ...(schema.properties as object), ...(envelope.properties as object) },
    required: [...((schema.required as Array<string>) ?? []), ...((envelope.required as Array<string>) ?? [])]
  }
}

/** A projected row may lack any key, so the advertised row schema requires none (`rowsKey`: the key of the rows). */
const optionalRowKeys = (schema: Json, rowsKey: string | undefined): Json => {
  if (rowsKey === undefined) return schema
  const props = schema.properties as Record<string, any> | undefined
  const list = props?.[rowsKey]
  if (list?.items) {
    const { required: _required, ...items } = list.items
    props![rowsKey] = { ...list, items }
  }
  return schema
}

/** A tool's advertised input schema (the arguments it decodes, with the object root MCP wants). */
export const toolInputJsonSchema = (input: Schema.Schema<any, any, never>): Json => {
  const slim = slimJsonSchema(objectRoot(toJsonSchema(input))) as Json
  // a tool refuses an argument key it does not define (the Dispatcher): its schema says so, once, at the top
  return slim.type === "object" ? { ...slim, additionalProperties: false } : slim
}

/**
 * A tool's full output schema: its result with the envelope's fields; `rowsKey`, for a tool whose list
 * rows can be projected, names the key whose rows then require no key.
 */
export const toolOutputJsonSchema = (output: Schema.Schema<any, any, never>, rowsKey?: string): Json =>
  slimJsonSchema(withEnvelope(optionalRowKeys(toJsonSchema(output), rowsKey))) as Json

/**
 * `tools/list` is paid for in every agent's context on every turn (docs/architecture.md, "What tools/list
 * carries"), so the output schemas it carries name each result's top-level keys with their types and enums;
 * a nested object or a list of objects is named by its type alone (a list of scalars says which). What each
 * key means, the rows, nested objects and their keys are one call away (`sophia.capability_catalog` with its
 * schemas, `sophia.get_sdk_types`), and in every result itself; what a shallow schema says is still true of
 * every result. (Rows' keys were listed here until the surface outgrew 8k tokens: they were a sixth of it.)
 */
const KEEP_AT_LEAF = ["type", "enum"] as const
/** A top-level key as tools/list names it: its type and enum; a list of scalars, the type of its items. */
const leafOf = (node: unknown): unknown => {
  if (typeof node !== "object" || node === null || Array.isArray(node)) return node
  const n = node as Record<string, unknown>
  if (Array.isArray(n.anyOf)) return { anyOf: n.anyOf.map(leafOf) }
  const leaf: Record<string, unknown> = {}
  for (const k of KEEP_AT_LEAF) if (n[k] !== undefined) leaf[k] = n[k]
  const itemType = n.type === "array" && typeof n.items === "object" && n.items !== null
    ? (n.items as Record<string, unknown>).type
    : undefined
  if (itemType !== undefined && itemType !== "object") leaf.items = { type: itemType }
  return leaf
}
export const advertisedOutput = (schema: Record<string, unknown>): Record<string, unknown> => {
  const { properties, required: _required, ...rest } = schema
  return typeof properties === "object" && properties !== null
    ? { ...rest, properties: Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, leafOf(v)])) }
    : rest
}

/**
 * A tool's input schema as tools/list carries it: the whole schema (every key, type, enum, requirement and
 * limit) except the descriptions of the arguments the registry adds to many tools (`shared`: `compact` and
 * `fields` of every list, `approval_id` of every write) — said once in the server's instructions, and in
 * full in `capability_catalog`'s schemas and `get_sdk_types`.
 */
export const advertisedInput = (schema: Json, shared: ReadonlyArray<string>): Json => {
  const properties = schema.properties as Record<string, Json> | undefined
  if (shared.length === 0 || properties === undefined) return schema
  const trimmed: Record<string, Json> = {}
  for (const [k, v] of Object.entries(properties)) {
    if (shared.includes(k) && typeof v === "object" && v !== null) {
      const { description: _description, ...rest } = v
      trimmed[k] = rest
    } else {
      trimmed[k] = v
    }
  }
  return { ...schema, properties: trimmed }
}
