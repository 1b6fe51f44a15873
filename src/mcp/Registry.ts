import { Context, Effect, Layer, Option, Schema } from "effect"
import { decideAccess } from "../domain/Access.js"
import { ApprovalArgs } from "../domain/Approvals.js"
import type { AccessClass, Caller } from "../domain/Auth.js"
import { EnvelopeFields } from "../domain/Envelope.js"
import type { ListProjection } from "../domain/Projection.js"
import { ProjectionArgs } from "../domain/Projection.js"
import { toJsonSchema } from "./JsonSchema.js"
import type { Refusal } from "./Refusals.js"

/** The four MCP tool annotations; every tool declares all of them. */
export interface ToolAnnotations {
  readonly readOnlyHint: boolean
  readonly destructiveHint: boolean
  readonly idempotentHint: boolean
  readonly openWorldHint: boolean
}

/** What a handler knows about the call besides its arguments. */
export interface ToolContext {
  readonly caller: Caller
  /** set when the call comes from inside `sophia.execute_code` (which cannot nest) */
  readonly viaSandbox: boolean
  /**
   * Call another tool as the same caller, through the same resolve → authorize → decode → service path
   * (marked as coming from the sandbox). For `execute_code`, which cannot close over the dispatcher.
   */
  readonly invoke: (name: string, args: unknown) => Effect.Effect<InvokeOutcome>
  /** the canonical names of every registered tool (reflection for the sandbox's camelCase mapping) */
  readonly toolNames: ReadonlyArray<string>
  /** the registry this call runs in (reflection for the catalog and the SDK types) */
  readonly registry: Registry
}

/** What `invoke` returns: the tool's body (envelope included) or its refusal body. */
export type InvokeOutcome =
  | { readonly ok: true; readonly body: Record<string, unknown> }
  | { readonly ok: false; readonly body: { readonly error: { readonly code: string; readonly message: string } } & Record<string, unknown> }

/**
 * One tool: the single source of truth for its name, group, access class, annotations, argument and
 * result Schemas, and the service call behind it. The JSON Schemas, `tools/list`, the catalog and the
 * SDK types are all derived from these entries.
 */
export interface Tool<I = any, O = any> {
  /** canonical dotted name, `sophia.<name>` */
  readonly name: string
  readonly group: string
  readonly access: AccessClass
  readonly description: string
  readonly annotations: ToolAnnotations
  readonly input: Schema.Schema<I, any, never>
  readonly output: Schema.Schema<O, any, never>
  /** a list-returning read tool: the shared `compact`/`fields` projection applies to `output[key]` */
  readonly projection?: ListProjection | undefined
  /**
   * Every effect of the handler is in the database transaction it runs in. Such a gated call is first
   * run in a transaction that is rolled back, so a call the service would refuse is refused before the
   * owner is asked. Never set it on a tool with effects outside the database.
   */
  readonly transactional?: boolean | undefined
  readonly handler: (input: I, context: ToolContext) => Effect.Effect<O, Refusal>
}

/** Declare a tool with its types inferred from its Schemas. */
export const defineTool = <I, II, O, OI>(tool: {
  readonly name: `sophia.${string}`
  readonly group: string
  readonly access: AccessClass
  readonly description: string
  readonly annotations: ToolAnnotations
  readonly input: Schema.Schema<I, II, never>
  readonly output: Schema.Schema<O, OI, never>
  readonly projection?: ListProjection | undefined
  readonly transactional?: boolean | undefined
  readonly handler: (input: I, context: ToolContext) => Effect.Effect<O, Refusal>
}): Tool<I, O> => tool

/** Annotation presets; a tool may still spell its own. */
export const READ_ONLY: ToolAnnotations = {
  readOnlyHint: true,
  destructiveHint: false,
  idempotentHint: true,
  openWorldHint: false
}
export const APPEND_ONLY: ToolAnnotations = {
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: false
}

export type ToolNaming = "underscore" | "dotted"

/** The wire name: `sophia_x` by default (clients that refuse dots), `sophia.x` with `--tool-names dotted`. */
export const wireName = (canonical: string, naming: ToolNaming) =>
  naming === "dotted" ? canonical : canonical.replace(/\./g, "_")

/** Both spellings are accepted on call, whatever is advertised. */
export const canonicalName = (name: string) => name.startsWith("sophia_") ? "sophia." + name.slice("sophia_".length) : name

export interface ListedTool {
  readonly name: string
  readonly description: string
  readonly inputSchema: Record<string, unknown>
  readonly outputSchema: Record<string, unknown>
  readonly annotations: ToolAnnotations
}

/** The envelope's properties added to every tool's output schema (refusals are `isError` text, not structured). */
const withEnvelope = (schema: Record<string, unknown>): Record<string, unknown> => {
  const envelope = slimEnvelope(toJsonSchema(EnvelopeFields))
  return {
    ...schema,
    type: "object",
    properties: { ...(schema.properties as object), ...(envelope.properties as object) },
    required: [...((schema.required as Array<string>) ?? []), ...((envelope.required as Array<string>) ?? [])]
  }
}

/** The arguments a tool decodes: its own, plus `compact`/`fields` when it returns a projectable list. */
export const effectiveInput = (tool: Tool): Schema.Schema<any, any, never> =>
  withApprovalArgs(tool, tool.projection ? Schema.extend(tool.input as Schema.Schema<any, any, never>, ProjectionArgs) : tool.input)

/** Write and elevated tools also take `approval_id` (repeat a call the owner approved; see Approvals). */
const withApprovalArgs = (tool: Tool, input: Schema.Schema<any, any, never>): Schema.Schema<any, any, never> =>
  tool.access === "write" || tool.access === "elevated" ? Schema.extend(input, ApprovalArgs) : input

/** A projected row may lack any key, so the advertised row schema requires none. */
const projectedOutput = (tool: Tool, schema: Record<string, unknown>) => {
  if (!tool.projection) return schema
  const props = schema.properties as Record<string, any> | undefined
  const list = props?.[tool.projection.key]
  if (list?.items) {
    const { required: _required, ...items } = list.items
    props![tool.projection.key] = { ...list, items }
  }
  return schema
}

/**
 * Run-time changes of the tool surface: whoever changes what a registry advertises calls `notify()`;
 * every connected MCP server forwards it as `notifications/tools/list_changed`.
 */
export interface SurfaceChanges {
  readonly subscribe: (listener: () => void) => () => void
  readonly notify: () => void
}

export const makeSurfaceChanges = (): SurfaceChanges => {
  const listeners = new Set<() => void>()
  return {
    subscribe: (listener) => {
      listeners.add(listener)
      return () => void listeners.delete(listener)
    },
    notify: () => [...listeners].forEach((listener) => listener())
  }
}

export interface Registry {
  readonly tools: ReadonlyArray<Tool>
  /** run-time surface changes (`tools/list_changed`) */
  readonly changes: SurfaceChanges
  /** by canonical or underscore name */
  readonly lookup: (name: string) => Option.Option<Tool>
  /** the tools a profile may call (anything not `forbidden`), as MCP `tools/list` entries */
  readonly listFor: (profile: Caller["profile"], naming: ToolNaming) => ReadonlyArray<ListedTool>
  readonly inputJsonSchema: (tool: Tool) => Record<string, unknown>
  readonly outputJsonSchema: (tool: Tool) => Record<string, unknown>
}

/** MCP wants `type: "object"` at the root; `Schema.Struct({})` (a tool without arguments) becomes `{}`'s anyOf. */
const objectRoot = (schema: Record<string, unknown>): Record<string, unknown> =>
  schema.type !== "object" && schema.properties === undefined && Array.isArray(schema.anyOf) &&
    schema.anyOf.every((m: any) => m?.type === "object" || m?.type === "array")
    ? { type: "object", properties: {} }
    : schema

/**
 * The envelope in every outputSchema: all its fields, typed but not spelled out (the server instructions
 * explain them; their full shape is in DESIGN.md and get_sdk_types' `Envelope`). In full, repeated in
 * every tool, it was a third of tools/list.
 */
const slimEnvelope = (envelope: Record<string, unknown>): Record<string, unknown> => {
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
 * `additionalProperties: false` (excess arguments are ignored anyway), Effect's generated `title`s and stock
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

export const makeRegistry = (tools: ReadonlyArray<Tool>): Registry => {
  const byName = new Map<string, Tool>()
  for (const tool of tools) {
    if (!/^sophia\.[a-z][a-z0-9_]*$/.test(tool.name)) throw new Error(`tool name ${tool.name} is not sophia.<snake_case>`)
    if (byName.has(tool.name)) throw new Error(`tool ${tool.name} registered twice`)
    byName.set(tool.name, tool)
  }
  const inputs = new Map<Tool, Record<string, unknown>>()
  const outputs = new Map<Tool, Record<string, unknown>>()
  const inputJsonSchema = (tool: Tool) => {
    let s = inputs.get(tool)
    if (!s) inputs.set(tool, s = slimJsonSchema(objectRoot(toJsonSchema(effectiveInput(tool)))) as Record<string, unknown>)
    return s
  }
  const outputJsonSchema = (tool: Tool) => {
    let s = outputs.get(tool)
    if (!s) outputs.set(tool, s = slimJsonSchema(withEnvelope(projectedOutput(tool, toJsonSchema(tool.output)))) as Record<string, unknown>)
    return s
  }
  const lists = new Map<string, ReadonlyArray<ListedTool>>()
  return {
    tools,
    changes: makeSurfaceChanges(),
    lookup: (name) => Option.fromNullable(byName.get(canonicalName(name))),
    inputJsonSchema,
    outputJsonSchema,
    listFor: (profile, naming) => {
      const key = `${profile}:${naming}`
      let list = lists.get(key)
      if (!list) {
        list = tools
          .filter((t) => decideAccess(profile, t.access) !== "forbidden")
          .map((t) => ({
            name: wireName(t.name, naming),
            description: t.description,
            inputSchema: inputJsonSchema(t),
            outputSchema: advertisedOutput(outputJsonSchema(t)),
            annotations: t.annotations
          }))
        lists.set(key, list)
      }
      return list
    }
  }
}

/**
 * `tools/list` is paid for in every agent's context on every turn, so the output schemas it carries stop
 * at two levels: top-level keys with their types, and the keys of list rows and nested objects with
 * their types. The full, deep schemas are one call away (`sophia.capability_catalog`,
 * `sophia.get_sdk_types`); what a shallow schema says is still true of every result.
 */
const KEEP_AT_LEAF = ["type", "description", "enum"] as const
const shallow = (node: unknown, depth: number): unknown => {
  if (typeof node !== "object" || node === null || Array.isArray(node)) return node
  const n = node as Record<string, unknown>
  if (Array.isArray(n.anyOf)) {
    const variants = n.anyOf.map((v) => shallow(v, depth))
    return { ...(n.description ? { description: n.description } : {}), anyOf: variants }
  }
  if (depth <= 0) {
    const leaf: Record<string, unknown> = {}
    for (const k of KEEP_AT_LEAF) if (n[k] !== undefined) leaf[k] = n[k]
    if (n.type === "array" && typeof n.items === "object" && n.items !== null) {
      leaf.items = { type: (n.items as Record<string, unknown>).type }
    }
    return leaf
  }
  const out: Record<string, unknown> = { ...n }
  // below the top level, which keys are always present is detail for the SDK types
  if (depth < 2) delete out.required
  if (typeof n.properties === "object" && n.properties !== null) {
    out.properties = Object.fromEntries(
      Object.entries(n.properties as Record<string, unknown>).map(([k, v]) => [k, shallow(v, depth - 1)])
    )
  }
  // a record's values count as one level down, like properties
  if (typeof n.additionalProperties === "object" && n.additionalProperties !== null) {
    out.additionalProperties = shallow(n.additionalProperties, depth - 1)
  }
  // a list's rows keep their keys: arrays do not use up a level
  if (typeof n.items === "object" && n.items !== null) out.items = shallow(n.items, depth)
  return out
}
export const advertisedOutput = (schema: Record<string, unknown>): Record<string, unknown> =>
  shallow(schema, 2) as Record<string, unknown>

/** A set of tools whose handlers close over the services they call (resolved once, at construction). */
export type ToolSet<R> = Effect.Effect<ReadonlyArray<Tool>, never, R>

export class ToolRegistry extends Context.Tag("sophia/ToolRegistry")<ToolRegistry, Registry>() {
  /** The registry built from tool sets, in order. */
  static readonly fromToolSets = <R>(...sets: ReadonlyArray<ToolSet<R>>): Layer.Layer<ToolRegistry, never, R> =>
    Layer.effect(ToolRegistry, Effect.map(Effect.all(sets), (lists) => makeRegistry(lists.flat())))
}
