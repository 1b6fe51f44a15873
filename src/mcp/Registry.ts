import { Context, Effect, Layer, Option, Schema } from "effect"
import { decideAccess } from "../domain/Access.js"
import { ApprovalArgs } from "../domain/Approvals.js"
import type { AccessClass, Caller } from "../domain/Auth.js"
import type { ListProjection } from "../domain/Projection.js"
import { ProjectionArgs } from "../domain/Projection.js"
import { advertisedInput, advertisedOutput, toolInputJsonSchema, toolOutputJsonSchema } from "./JsonSchema.js"
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
  /** set when the call comes from inside `sophia.execute_code` (the outer reply carries the envelope) */
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

/** What `invoke` returns: the tool's body or its refusal body, without envelope fields (the outer response carries them). */
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

/** The arguments a tool decodes: its own, plus `compact`/`fields` when it returns a projectable list. */
export const effectiveInput = (tool: Tool): Schema.Schema<any, any, never> =>
  withApprovalArgs(tool, tool.projection ? Schema.extend(tool.input as Schema.Schema<any, any, never>, ProjectionArgs) : tool.input)

/** Write and elevated tools also take `approval_id` (repeat a call the owner approved; see Approvals). */
const withApprovalArgs = (tool: Tool, input: Schema.Schema<any, any, never>): Schema.Schema<any, any, never> =>
  takesApproval(tool) ? Schema.extend(input, ApprovalArgs) : input

const takesApproval = (tool: Tool) => tool.access === "write" || tool.access === "elevated"

/** The arguments the registry adds to a tool (their meaning is said once, not in every tool of tools/list). */
export const sharedArguments = (tool: Tool): ReadonlyArray<string> => [
  ...(tool.projection ? Object.keys(ProjectionArgs.fields) : []),
  ...(takesApproval(tool) ? Object.keys(ApprovalArgs.fields) : [])
]

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
    if (!s) inputs.set(tool, s = toolInputJsonSchema(effectiveInput(tool)))
    return s
  }
  const outputJsonSchema = (tool: Tool) => {
    let s = outputs.get(tool)
    if (!s) outputs.set(tool, s = toolOutputJsonSchema(tool.output, tool.projection?.key))
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
            inputSchema: advertisedInput(inputJsonSchema(t), sharedArguments(t)),
            outputSchema: advertisedOutput(outputJsonSchema(t)),
            annotations: t.annotations
          }))
        lists.set(key, list)
      }
      return list
    }
  }
}

/** A set of tools whose handlers close over the services they call (resolved once, at construction). */
export type ToolSet<R> = Effect.Effect<ReadonlyArray<Tool>, never, R>

export class ToolRegistry extends Context.Tag("sophia/ToolRegistry")<ToolRegistry, Registry>() {
  /** The registry built from tool sets, in order. */
  static readonly fromToolSets = <R>(...sets: ReadonlyArray<ToolSet<R>>): Layer.Layer<ToolRegistry, never, R> =>
    Layer.effect(ToolRegistry, Effect.map(Effect.all(sets), (lists) => makeRegistry(lists.flat())))
}
