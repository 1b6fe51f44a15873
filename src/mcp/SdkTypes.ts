/**
 * Ambient TypeScript declarations of the tool surface, generated from the same JSON Schemas that
 * `tools/list` advertises (which are generated from the tools' Effect Schemas): a global `sophia`
 * namespace with one camelCase method per tool, its argument and result types (envelope fields and the
 * `compact`/`fields` projection arguments included, exactly as on the wire) and doc comments from the
 * descriptions. Nothing here is hand-kept: every line comes from the registry.
 */
import { EnvelopeFields } from "../domain/Envelope.js"
import { toJsonSchema } from "./JsonSchema.js"
import type { Registry, Tool } from "./Registry.js"

type Json = { readonly [key: string]: unknown }

/** `sophia.coordination_post` → `coordinationPost`: the method name inside `execute_code` and the SDK types. */
export const camelName = (canonical: string): string =>
  canonical.replace(/^sophia[._]/, "").replace(/_+([a-z0-9])/g, (_, c: string) => c.toUpperCase())

/** `sophia.coordination_post` → `CoordinationPost`: the stem of the tool's `…Args` / `…Result` type names. */
export const pascalName = (canonical: string): string => {
  const camel = camelName(canonical)
  return camel.charAt(0).toUpperCase() + camel.slice(1)
}

/**
 * camelCase method name → canonical tool name, by reflection over the given names (the registry's).
 * Throws if two tools would map to the same method (the registry's naming rule makes that unlikely).
 */
export const camelMapping = (canonicalNames: Iterable<string>): ReadonlyMap<string, string> => {
  const map = new Map<string, string>()
  for (const name of canonicalNames) {
    const camel = camelName(name)
    const clash = map.get(camel)
    if (clash !== undefined && clash !== name) throw new Error(`tools ${clash} and ${name} both map to sophia.${camel}`)
    map.set(camel, name)
  }
  return map
}

/** The canonical tool name a camelCase method stands for, if any. */
export const canonicalFromCamel = (camel: string, canonicalNames: Iterable<string>): string | undefined =>
  camelMapping(canonicalNames).get(camel)

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/
const propertyKey = (key: string) => IDENTIFIER.test(key) ? key : JSON.stringify(key)

/** A `/** … *\/` block (or nothing), safe against `*\/` inside the text. */
const docComment = (text: string | undefined, indent: string): string => {
  if (!text || text.trim() === "") return ""
  const lines = text.replace(/\*\//g, "*\\/").split(/\r?\n/)
  return lines.length === 1
    ? `${indent}/** ${lines[0]} */\n`
    : `${indent}/**\n${lines.map((l) => `${indent} * ${l}`.trimEnd()).join("\n")}\n${indent} */\n`
}

const literal = (value: unknown): string => value === null ? "null" : JSON.stringify(value)

const union = (members: ReadonlyArray<string>): string => {
  const unique = [...new Set(members)]
  if (unique.length === 0) return "never"
  if (unique.includes("unknown")) return "unknown"
  return unique.length === 1 ? unique[0] : unique.map((m) => m.includes("=>") ? `(${m})` : m).join(" | ")
}

const wrap = (t: string) => /[|&]/.test(t) && !/^[{(]/.test(t) ? `(${t})` : t

/**
 * The TypeScript type of a JSON Schema (draft-07 as `JSONSchema.make` emits it, `$ref`s already inlined).
 * `depth` is the indentation level of nested object literals.
 */
export const typeOf = (schema: unknown, depth = 0): string => {
  if (schema === true || schema === undefined) return "unknown"
  if (schema === false) return "never"
  if (typeof schema !== "object" || schema === null) return "unknown"
  const s = schema as Json
  switch (s.$id) {
    case "/schemas/unknown":
    case "/schemas/any":
      return "unknown"
    case "/schemas/object":
      return "object"
    case "/schemas/{}":
    case "/schemas/%7B%7D":
      return "{}"
  }
  if ("const" in s) return literal(s.const)
  if (Array.isArray(s.enum)) return union(s.enum.map(literal))
  if (Array.isArray(s.anyOf)) return union(s.anyOf.map((m) => typeOf(m, depth)))
  if (Array.isArray(s.oneOf)) return union(s.oneOf.map((m) => typeOf(m, depth)))
  if (Array.isArray(s.allOf)) return s.allOf.length === 0 ? "unknown" : s.allOf.map((m) => wrap(typeOf(m, depth))).join(" & ")
  if (Array.isArray(s.type)) return union(s.type.map((t) => typeOf({ ...s, type: t }, depth)))
  switch (s.type) {
    case "string":
      return "string"
    case "number":
    case "integer":
      return "number"
    case "boolean":
      return "boolean"
    case "null":
      return "null"
    case "array":
      return arrayType(s, depth)
    case "object":
      return objectType(s, depth)
  }
  if (s.properties !== undefined || s.additionalProperties !== undefined) return objectType(s, depth)
  if (s.items !== undefined) return arrayType(s, depth)
  return "unknown"
}

const arrayType = (s: Json, depth: number): string => {
  const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : undefined
  if (prefix) {
    const min = typeof s.minItems === "number" ? s.minItems : prefix.length
    const elements = prefix.map((item, i) => typeOf(item, depth) + (i >= min ? "?" : ""))
    const rest = Array.isArray(s.prefixItems) ? s.items : s.additionalItems
    if (rest !== undefined && rest !== false) elements.push(`...Array<${typeOf(rest, depth)}>`)
    return `[${elements.join(", ")}]`
  }
  return `Array<${typeOf(s.items, depth)}>`
}

const objectType = (s: Json, depth: number): string => {
  const properties = (s.properties ?? {}) as Record<string, unknown>
  const required = new Set((s.required ?? []) as ReadonlyArray<string>)
  const indent = "  ".repeat(depth + 1)
  const members: Array<string> = []
  for (const [key, value] of Object.entries(properties)) {
    const description = typeof (value as Json | undefined)?.description === "string"
      ? (value as Json).description as string
      : undefined
    members.push(
      `${docComment(description, indent)}${indent}${propertyKey(key)}${required.has(key) ? "" : "?"}: ${
        typeOf(value, depth + 1)
      }`
    )
  }
  const index: Array<string> = []
  if (s.patternProperties && typeof s.patternProperties === "object") {
    for (const value of Object.values(s.patternProperties as Record<string, unknown>)) index.push(typeOf(value, depth + 1))
  }
  if (s.additionalProperties !== undefined && s.additionalProperties !== false) {
    index.push(typeOf(s.additionalProperties, depth + 1))
  } else if (s.additionalProperties === undefined && members.length === 0 && index.length === 0) {
    index.push("unknown")
  }
  if (index.length > 0) {
    // an index signature must admit every named property's type too
    const named = Object.entries(properties).map(([k, v]) => typeOf(v, depth + 1) + (required.has(k) ? "" : " | undefined"))
    members.push(`${indent}[key: string]: ${union([...index, ...(named.length > 0 && !index.includes("unknown") ? named : [])])}`)
  }
  if (members.length === 0) return "{}"
  return `{\n${members.join("\n")}\n${"  ".repeat(depth)}}`
}

/** The fields every result carries, from the envelope's own Schema. */
const envelopeSchema = toJsonSchema(EnvelopeFields)
const envelopeKeys = Object.keys(envelopeSchema.properties as object)

/** A result type: the tool's own fields `& Envelope` (the envelope is declared once). */
const resultType = (output: Json): string => {
  const props = (output.properties ?? {}) as Record<string, unknown>
  if (!envelopeKeys.every((k) => k in props)) return typeOf(output, 1)
  const own = Object.fromEntries(Object.entries(props).filter(([k]) => !envelopeKeys.includes(k)))
  const required = ((output.required ?? []) as ReadonlyArray<string>).filter((k) => !envelopeKeys.includes(k))
  const ownType = typeOf({ ...output, properties: own, required }, 1)
  return ownType === "{}" ? "Envelope" : `${ownType} & Envelope`
}

/** True when a tool can be called with no arguments at all (no required argument). */
const argsOptional = (schema: Json) => !Array.isArray(schema.required) || schema.required.length === 0

/** The declaration block of one tool: its `…Args`/`…Result` types and its method. */
const declareTool = (registry: Registry, tool: Tool): string => {
  const stem = pascalName(tool.name)
  const input = registry.inputJsonSchema(tool)
  const output = registry.outputJsonSchema(tool)
  const indent = "  "
  const method = camelName(tool.name)
  const doc = [
    tool.description,
    "",
    `Tool \`${tool.name}\` (group ${tool.group}, access ${tool.access}).`,
    ...(tool.projection
      ? [`Rows in \`${tool.projection.key}\`: \`compact: true\` keeps ${tool.projection.compact.join(", ")}; \`fields\` picks exact keys.`]
      : [])
  ].join("\n")
  return [
    docComment(`Arguments of \`${tool.name}\`.`, indent) + `${indent}type ${stem}Args = ${typeOf(input, 1)}`,
    docComment(`Result of \`${tool.name}\`.`, indent) + `${indent}type ${stem}Result = ${resultType(output)}`,
    docComment(doc, indent) +
    `${indent}function ${method}(args${argsOptional(input) ? "?" : ""}: ${stem}Args): Promise<${stem}Result>`
  ].join("\n")
}

/**
 * The ambient declarations of `tools` (by default the whole registry): `declare namespace sophia { … }`,
 * the global `sophia` that `execute_code` snippets see. Deterministic for a given registry.
 */
export const generateDeclarations = (registry: Registry, tools: ReadonlyArray<Tool> = registry.tools): string => {
  camelMapping(tools.map((t) => t.name))
  const blocks = tools.map((tool) => declareTool(registry, tool))
  return [
    "// Generated from the Sophia tool registry by sophia.get_sdk_types. Do not edit.",
    "// A refused call rejects (inside execute_code: an Error whose .code is the refusal code).",
    "declare namespace sophia {",
    docComment("Fields spliced into every result: your unread count, your open waits, waits that just resolved.", "  ") +
    `  type Envelope = ${typeOf(envelopeSchema, 1)}`,
    "",
    blocks.join("\n\n"),
    "}",
    ""
  ].join("\n")
}
