import { Cause, Clock, Effect, Option, ParseResult, Schema } from "effect"
import type { Caller } from "../domain/Auth.js"
import { NotFound, UnknownFields, ValidationError } from "../domain/Errors.js"
import type { ProjectionArgs } from "../domain/Projection.js"
import { projectRows, rowKeys, selectKeys } from "../domain/Projection.js"
import { ARGUMENTS_MAX_DEPTH, checkArguments, formatJsonIssue, JSON_MAX_DEPTH } from "../domain/Json.js"
import { nearest } from "../domain/Names.js"
import type { ElicitAnswer } from "../domain/Approvals.js"
import { recordToolCall, RequestLog } from "../observability/Metrics.js"
import { Approvals } from "../services/Approvals.js"
import { Auth } from "../services/Auth.js"
import { Coordination } from "../services/Coordination.js"
import { Envelope } from "./Envelope.js"
import { formatParseError } from "./ParseIssues.js"
import type { Refusal, RefusalBody } from "./Refusals.js"
import { refusalBody } from "./Refusals.js"
import type { Tool } from "./Registry.js"
import { effectiveInput, ToolRegistry } from "./Registry.js"

export type CallOutcome =
  | { readonly ok: true; readonly body: Record<string, unknown> }
  | {
    readonly ok: false
    /** absent for an internal defect (logged, never shown in detail) */
    readonly refusal: Refusal | undefined
    readonly body: { readonly error: RefusalBody } & Record<string, unknown>
  }

export interface CallOptions {
  /** the call comes from inside `execute_code` */
  readonly viaSandbox?: boolean
  /** ask the client's user through MCP elicitation (set by the MCP server when the client declared it) */
  readonly elicit?: ((message: string) => Effect.Effect<ElicitAnswer>) | undefined
  /**
   * Compute the envelope fields (default true). `execute_code`'s inner calls say false: their bodies reach
   * the snippet without envelope (the outer response carries it, once), so reading it per inner call
   * would be a wasted probe.
   */
  readonly envelope?: boolean
}

/**
 * The one path of every tool call, whatever the transport (Streamable HTTP, stdio, REST, execute_code):
 * resolve the name → authorize → decode → call the service → encode → splice the envelope. No business
 * rule lives here.
 */
export class Dispatcher extends Effect.Service<Dispatcher>()("sophia/Dispatcher", {
  effect: Effect.gen(function*() {
    const auth = yield* Auth
    const approvals = yield* Approvals
    const coordination = yield* Coordination
    const registry = yield* ToolRegistry
    const envelope = yield* Envelope
    const logCalls = yield* RequestLog
    // each tool's decoder and encoder, made once (not per call)
    const decoders = new Map<Tool, (u: unknown) => Effect.Effect<unknown, ParseResult.ParseError>>()
    const decoderOf = (tool: Tool) => {
      let d = decoders.get(tool)
      if (!d) {
        decoders.set(tool, d = Schema.decodeUnknown(effectiveInput(tool), { errors: "all", onExcessProperty: "ignore" }))
      }
      return d
    }
    const encoders = new Map<Tool, (a: unknown) => Effect.Effect<unknown, ParseResult.ParseError>>()
    const encoderOf = (tool: Tool) => {
      let e = encoders.get(tool)
      if (!e) encoders.set(tool, e = Schema.encode(tool.output as Schema.Schema<unknown, unknown>))
      return e
    }

    const toolNames = registry.tools.map((t) => t.name)

    const run = (caller: Caller, name: string, args: unknown, options: CallOptions) =>
      Effect.gen(function*() {
        const tool = Option.getOrUndefined(registry.lookup(name))
        if (!tool) {
          return yield* new NotFound({
            what: "tool",
            id: name,
            suggestions: nearest(name.replace(/^sophia[._]/, ""), registry.tools.map((t) => t.name.slice(7))).map((n) =>
              `sophia.${n}`
            )
          })
        }
        const gate = yield* auth.authorize(caller, tool)
        // the arguments as a whole first (an object, well-formed, bounded depth): nothing below walks a hostile shape
        const shape = checkArguments(args, gate === "allow" ? ARGUMENTS_MAX_DEPTH : JSON_MAX_DEPTH)
        if (shape) return yield* new ValidationError({ detail: formatJsonIssue(shape) })
        const input = yield* decoderOf(tool)(args ?? {}).pipe(
          Effect.mapError((e) => new ValidationError({ detail: formatParseError(e) }))
        )
        // the shared projection: unknown fields are refused before the service runs (nothing is marked read)
        const projection = tool.projection
        const selection = projection ? selectKeys(projection, input as ProjectionArgs) : undefined
        if (projection && selection && selection.unknown.length > 0) {
          return yield* new UnknownFields({ unknown: selection.unknown, valid_keys: rowKeys(projection) })
        }
        const execute = Effect.gen(function*() {
          const result = yield* tool.handler(input, {
            caller,
            viaSandbox: options.viaSandbox ?? false,
            invoke: (innerName, innerArgs) =>
              call(caller, innerName, innerArgs, { viaSandbox: true, envelope: false, elicit: options.elicit }),
            toolNames,
            registry
          })
          const body = (yield* Effect.orDie(encoderOf(tool)(result))) as Record<string, unknown>
          if (projection && selection?.keep && Array.isArray(body[projection.key])) {
            return { ...body, [projection.key]: projectRows(body[projection.key] as Array<Record<string, unknown>>, selection.keep, selection.preview) }
          }
          return body
        })
        // an assistant's write or any elevated call runs only under an approval bound to these exact arguments
        if (gate === "allow") return yield* execute
        return yield* approvals.gate({
          caller,
          tool,
          decision: gate,
          args: args ?? {},
          elicit: options.elicit,
          execute,
          dryRunSafe: tool.transactional === true
        })
      })

    /** Call a tool as `caller`. Never fails: refusals and defects come back as an outcome with the envelope. */
    const call = (caller: Caller, name: string, args: unknown, options: CallOptions = {}): Effect.Effect<CallOutcome> =>
      run(caller, name, args, options).pipe(
        Effect.map((body) => ({ ok: true as const, body })),
        Effect.catchAll((refusal: Refusal) =>
          Effect.succeed({ ok: false as const, refusal, body: { error: refusalBody(refusal) } })
        ),
        Effect.catchAllDefect((defect) =>
          Effect.logError("tool call failed", Cause.die(defect)).pipe(
            Effect.as({
              ok: false as const,
              refusal: undefined,
              body: { error: { code: "internal_error", message: "the server failed while handling this call; it was logged" } }
            })
          )
        ),
        Effect.flatMap((outcome) =>
          options.envelope === false ? Effect.succeed(outcome) : Effect.map(
            envelope.fields(caller, { deliver: !(options.viaSandbox ?? false) }),
            (fields): CallOutcome => ({ ...outcome, body: { ...outcome.body, ...fields } } as CallOutcome)
          )
        ),
        observed(caller, name, options),
        Effect.withSpan("Dispatcher.call", { attributes: { tool: name } })
      )

    /** One metric update, one span attribute and one `info` log line per finished call. */
    const observed = (caller: Caller, name: string, options: CallOptions) => (self: Effect.Effect<CallOutcome>) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        const outcome = yield* self
        const ms = (yield* Clock.currentTimeMillis) - started
        const tool = Option.match(registry.lookup(name), { onNone: () => "unknown", onSome: (t) => t.name })
        const result = outcome.ok ? "ok" : outcome.body.error.code
        yield* recordToolCall(tool, result, ms / 1000)
        yield* Effect.annotateCurrentSpan({ "sophia.tool": tool, "sophia.outcome": result })
        if (!logCalls) return outcome
        yield* Effect.logInfo("tool call").pipe(Effect.annotateLogs({
          tool,
          outcome: result,
          ms,
          connection: caller.connectionShort,
          ...(options.viaSandbox === true ? { via: "execute_code" } : {})
        }))
        return outcome
      })

    return {
      call,
      authenticate: auth.authenticate,
      registry,
      /** the inbox resources' subscriptions (see McpServer): `onUpdate` on every post the caller would see as unread */
      watchInbox: coordination.watchUnread
    } as const
  })
}) {}
