import { Cause, Effect, FiberRef, LogLevel, Option, ParseResult, Schema } from "effect"
import type { Tracer } from "effect"
import type { Caller } from "../domain/Auth.js"
import { Busy, NotFound, UnknownArguments, UnknownFields, ValidationError } from "../domain/Errors.js"
import type { ProjectionArgs } from "../domain/Projection.js"
import { projectRows, rowKeys, selectKeys } from "../domain/Projection.js"
import { ARGUMENTS_MAX_DEPTH, checkArguments, formatJsonIssue, JSON_MAX_DEPTH } from "../domain/Json.js"
import { closest, nearest } from "../domain/Names.js"
import type { ElicitAnswer } from "../domain/Approvals.js"
import { recordToolCall, RequestLog } from "../observability/Metrics.js"
import { Approvals } from "../services/Approvals.js"
import { Auth } from "../services/Auth.js"
import { Coordination } from "../services/Coordination.js"
import { DEFAULT_CONFLICT_RETRY, isWriteConflict } from "../services/store/Conflicts.js"
import { Envelope } from "./Envelope.js"
import { formatParseError } from "./ParseIssues.js"
import type { Refusal, RefusalBody } from "./Refusals.js"
import { refusalBody } from "./Refusals.js"
import type { Registry, Tool } from "./Registry.js"
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

const internalError = (): CallOutcome => ({
  ok: false,
  refusal: undefined,
  body: { error: { code: "internal_error", message: "the server failed while handling this call; it was logged" } }
})
/** `deliver: false` (calls from inside execute_code) leaves once-only signals for the outer response */
const DELIVER_SIGNALS = { deliver: true } as const
const HOLD_SIGNALS = { deliver: false } as const

/** Each tool's decoder and encoder, made once per tool (not per call). */
const makeCodecs = () => {
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
  return { decoderOf, encoderOf } as const
}

/**
 * The argument keys each tool defines (its advertised input schema's properties, so what is refused is
 * exactly what is not advertised), and the refusal of any other: each unknown key with the valid key it is
 * closest to.
 */
const makeArgumentCheck = (registry: Registry) => {
  const keys = new Map<Tool, ReadonlySet<string>>()
  const keysOf = (tool: Tool) => {
    let known = keys.get(tool)
    if (known === undefined) {
      const properties = registry.inputJsonSchema(tool).properties
      keys.set(tool, known = new Set(typeof properties === "object" && properties !== null ? Object.keys(properties) : []))
    }
    return known
  }
  return (tool: Tool, args: unknown): UnknownArguments | undefined => {
    if (typeof args !== "object" || args === null || Array.isArray(args)) return undefined
    const known = keysOf(tool)
    let unknown: Array<string> | undefined
    for (const key in args) if (!known.has(key)) (unknown ??= []).push(key)
    if (unknown === undefined) return undefined
    const didYouMean: Record<string, string> = {}
    for (const key of unknown) {
      const near = closest(key, known)
      if (near !== undefined) didYouMean[key] = near
    }
    return new UnknownArguments({ tool: tool.name, unknown, did_you_mean: didYouMean, valid_keys: [...known] })
  }
}

/**
 * "did you mean" for an unknown tool name: the registry's tools never change, so each name's suggestions are
 * worked out once (an edit distance to every tool); bounded, a flood of names only starts the memo afresh.
 */
const makeSuggestions = (tools: ReadonlyArray<Tool>) => {
  const shortNames = tools.map((t) => t.name.slice(7))
  const suggestions = new Map<string, ReadonlyArray<string>>()
  return (name: string) => {
    let found = suggestions.get(name)
    if (found === undefined) {
      if (suggestions.size >= 256) suggestions.clear()
      found = nearest(name.replace(/^sophia[._]/, ""), shortNames).map((n) => `sophia.${n}`)
      suggestions.set(name, found)
    }
    return found
  }
}

/** A refusal (the first failure) or a defect (logged) as an outcome; an interruption stays one. */
const outcomeOf = (cause: Cause.Cause<Refusal>): Effect.Effect<CallOutcome> => {
  const refusal = Cause.failureOption(cause)
  if (Option.isSome(refusal)) {
    return Effect.succeed({ ok: false, refusal: refusal.value, body: { error: refusalBody(refusal.value) } })
  }
  const defect = Cause.dieOption(cause)
  if (Option.isSome(defect)) {
    // a write the store rolled back on a conflict, every retry too (services/store/Conflicts.ts): say so
    if (isWriteConflict(defect.value)) {
      const busy = new Busy({ attempts: DEFAULT_CONFLICT_RETRY.attempts, retry_after_s: 1 })
      return Effect.as(Effect.logWarning("tool call rolled back on a write conflict", Cause.die(defect.value)), {
        ok: false,
        refusal: busy,
        body: { error: refusalBody(busy) }
      } as const)
    }
    return Effect.as(Effect.logError("tool call failed", Cause.die(defect.value)), internalError())
  }
  return Effect.failCause(cause as Cause.Cause<never>)
}
const succeeded = (body: Record<string, unknown>): Effect.Effect<CallOutcome> => Effect.succeed({ ok: true, body })

/** The call's `info` line; nothing is built when the log level drops it. */
const logCall = (tool: string, outcome: string, ms: number, caller: Caller, options: CallOptions) =>
  Effect.withFiberRuntime<void>((fiber) =>
    LogLevel.greaterThan(fiber.getFiberRef(FiberRef.currentMinimumLogLevel), LogLevel.Info)
      ? Effect.void
      : Effect.annotateLogs(
        Effect.logInfo("tool call"),
        options.viaSandbox === true
          ? { tool, outcome, ms, connection: caller.connectionShort, via: "execute_code" }
          : { tool, outcome, ms, connection: caller.connectionShort }
      )
  )

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
    const { decoderOf, encoderOf } = makeCodecs()
    const unknownArguments = makeArgumentCheck(registry)
    const toolNames = registry.tools.map((t) => t.name)
    const suggestionsFor = makeSuggestions(registry.tools)

    const run = (caller: Caller, tool: Tool | undefined, name: string, args: unknown, options: CallOptions) =>
      Effect.gen(function*() {
        if (!tool) return yield* new NotFound({ what: "tool", id: name, suggestions: suggestionsFor(name) }, true)
        const gate = yield* auth.authorize(caller, tool)
        // the arguments as a whole first (an object, well-formed, bounded depth): nothing below walks a hostile shape
        const shape = checkArguments(args, gate === "allow" ? ARGUMENTS_MAX_DEPTH : JSON_MAX_DEPTH)
        if (shape) return yield* new ValidationError({ detail: formatJsonIssue(shape) })
        // a key the tool does not define is refused before anything else is judged (a misspelled key would
        // otherwise be ignored: a wrong answer that looks right)
        const unknown = unknownArguments(tool, args)
        if (unknown) return yield* unknown
        const input = yield* Effect.suspend(() => decoderOf(tool)(args ?? {})).pipe(
          Effect.mapError((e) => new ValidationError({ detail: formatParseError(e) })),
          // a value the decoder cannot even look at is refused like any unreadable argument: Effect's lookup of a
          // union's variant calls String() on the discriminant, which throws (as the decoder is called: hence
          // `suspend`) for a JSON object whose own `toString` is not a function ({"type": {"toString": 1}})
          Effect.catchAllDefect((defect) =>
            Effect.zipRight(
              Effect.logDebug("tool arguments the decoder could not read", defect),
              new ValidationError({ detail: `the arguments could not be read (${defect instanceof Error ? defect.message : "unreadable value"})` })
            )
          )
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

    /**
     * Call a tool as `caller`. Never fails: refusals and defects come back as an outcome with the envelope.
     * Around it, once per finished call: one metric update, the span's attributes and one `info` log line.
     * The call is a span (`Dispatcher.call`, the services' spans under it) only while the tracer is on:
     * with nothing exporting spans, a no-op span would still be made and put into the call's context.
     */
    const call = (caller: Caller, name: string, args: unknown, options: CallOptions = {}): Effect.Effect<CallOutcome> =>
      Effect.withFiberRuntime((fiber) =>
        fiber.getFiberRef(FiberRef.currentTracerEnabled)
          // no call-site stack capture for the span (Effect.withSpan's default is a new Error per call)
          ? Effect.useSpan("Dispatcher.call", { attributes: { tool: name }, captureStackTrace: false }, (span) =>
            Effect.withParentSpan(observedCall(caller, name, args, options, span), span))
          : observedCall(caller, name, args, options, undefined)
      )

    const observedCall = (caller: Caller, name: string, args: unknown, options: CallOptions, span: Tracer.Span | undefined) =>
      Effect.clockWith((clock) => {
        const started = clock.unsafeCurrentTimeMillis()
        const tool = Option.getOrUndefined(registry.lookup(name))
        const settled = Effect.matchCauseEffect(run(caller, tool, name, args, options), {
          onFailure: outcomeOf,
          onSuccess: succeeded
        })
        const enveloped = options.envelope === false ? settled : Effect.flatMap(settled, (outcome) =>
          Effect.map(
            envelope.fields(caller, options.viaSandbox === true ? HOLD_SIGNALS : DELIVER_SIGNALS),
            (fields): CallOutcome => ({ ...outcome, body: { ...outcome.body, ...fields } } as CallOutcome)
          ))
        return Effect.flatMap(enveloped, (outcome) => {
          const ms = clock.unsafeCurrentTimeMillis() - started
          const toolName = tool?.name ?? "unknown"
          const result = outcome.ok ? "ok" : outcome.body.error.code
          recordToolCall(toolName, result, ms / 1000)
          span?.attribute("sophia.tool", toolName)
          span?.attribute("sophia.outcome", result)
          if (!logCalls) return Effect.succeed(outcome)
          return Effect.as(logCall(toolName, result, ms, caller, options), outcome)
        })
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
