import type { Scope } from "effect"
import { Effect, FiberSet } from "effect"
import { nearest } from "../../domain/Names.js"
import { ENVELOPE_KEYS, EXECUTE_CODE_TOOL, InnerRefusal, SANDBOX_MAX_ARGS_BYTES } from "../../domain/Sandbox.js"
import type { Child } from "../../sandbox/Child.js"
import { send } from "../../sandbox/Child.js"
import type { Watched } from "./Revocations.js"
import type { SandboxHost } from "./Types.js"

/** a method name longer than this is cut (it is only ever looked up, and named in a refusal) */
const MAX_METHOD_CHARS = 200

/** One host call as the snippet made it: its id in the run, the camelCase method, the arguments' JSON. */
export interface HostCall {
  readonly call: number
  readonly method: string
  readonly args: string
}

/**
 * The calls of one batch, in order, at most `limit` of them. The text comes from the isolate (untrusted):
 * anything but an array of `[number, string, string]` entries is dropped, entry by entry.
 */
export const callsOf = (batch: string, limit: number): Array<HostCall> => {
  let entries: unknown
  try {
    entries = JSON.parse(batch)
  } catch {
    return []
  }
  if (!Array.isArray(entries)) return []
  const out: Array<HostCall> = []
  for (const e of entries) {
    if (out.length >= limit) break
    if (!Array.isArray(e) || typeof e[0] !== "number" || typeof e[1] !== "string" || typeof e[2] !== "string") continue
    out.push({ call: e[0], method: e[1].slice(0, MAX_METHOD_CHARS), args: e[2] })
  }
  return out
}

const stripEnvelope = (body: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(body)) if (!ENVELOPE_KEYS.includes(k)) out[k] = v
  return out
}

type RefusalBody = { code: string; message: string } & Record<string, unknown>

/**
 * The inner calls of one run on `child`: each checked, then made through `host`, its answer sent back to
 * the isolate. A call refused (here or by the tool) is remembered, so the run can pass that refusal through
 * when the snippet lets it escape (and only one it really received: the isolate cannot forge one).
 *
 * Answers leave in batches: each is queued as it comes; the queue goes out in one message at once when no
 * other call of the run is in flight, else once the daemon has nothing more to do right now (setImmediate:
 * after the ready fibers have run, so the answers of calls that finish together travel together, and one
 * that takes long holds back no other). Nothing is sent once the run's scope closes (its calls still in
 * flight are interrupted first).
 *
 * `guard` (the run's watch on its connection, see Revocations.ts): each call is refused `unauthenticated`
 * once the connection is revoked, and the calls in flight are listed there for the revocation to interrupt.
 */
export const makeHostCalls = (child: Child, run: number, host: SandboxHost, guard?: Pick<Watched, "calls" | "isRevoked">): Effect.Effect<{
  /** Start a batch's calls, in order: the whole batch is in flight before any of its calls can answer. */
  readonly inFlight: (count: number) => void
  readonly start: (call: HostCall) => Effect.Effect<void>
  /** Interrupt the calls still in flight (the run is over). */
  readonly stop: Effect.Effect<void>
  readonly refused: ReadonlyMap<number, InnerRefusal>
}, never, Scope.Scope> =>
  Effect.gen(function*() {
    let outgoing: Array<string> = []
    let flushing: ReturnType<typeof setImmediate> | undefined
    let inFlight = 0
    let over = false
    const flush = () => {
      flushing = undefined
      if (over || outgoing.length === 0) return
      const batch = `[${outgoing.join(",")}]`
      outgoing = []
      send(child, { t: "results", run, batch })
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        over = true
        if (flushing !== undefined) clearImmediate(flushing)
        flushing = undefined
        outgoing = []
      })
    )
    // (made after the finalizer above, so closed before it: in-flight calls stop, then nothing more is sent)
    const fibers = yield* FiberSet.make()
    const refused = new Map<number, InnerRefusal>()

    const handle = (m: HostCall) => {
      const reply = (ok: boolean, body: unknown) =>
        Effect.sync(() => {
          inFlight--
          if (over) return
          outgoing.push(`[${m.call},${ok ? 1 : 0},${JSON.stringify(body)}]`)
          if (inFlight === 0) {
            if (flushing !== undefined) clearImmediate(flushing)
            flush()
          } else {
            flushing ??= setImmediate(flush)
          }
        })
      const refuse = (tool: string, error: RefusalBody) => {
        const { code, message, ...details } = error
        refused.set(m.call, new InnerRefusal({ code, reason: message, tool, details }))
        return reply(false, error)
      }
      return Effect.gen(function*() {
        // revoked during the run: nothing more is done as that connection
        if (guard?.isRevoked() === true) {
          return yield* refuse(host.methods.get(m.method) ?? `sophia.${m.method}`, {
            code: "unauthenticated",
            reason: "unknown_or_revoked",
            message: "this connection was revoked while the snippet ran: the call was not made",
            hint: "a revoked bearer never works again: ask the owner for a new connection"
          })
        }
        const name = host.methods.get(m.method)
        if (name === undefined) {
          const suggestions = nearest(m.method, host.methods.keys())
          return yield* refuse(`sophia.${m.method}`, {
            code: "not_found",
            message: `no method sophia.${m.method}; did you mean ${suggestions.map((s) => `sophia.${s}`).join(", ")}?`,
            what: "method",
            id: m.method,
            suggestions
          })
        }
        // the one place the rule lives: a snippet's calls never reach execute_code
        if (name === EXECUTE_CODE_TOOL) {
          return yield* refuse(name, { code: "sandbox_error", message: `${EXECUTE_CODE_TOOL} cannot be nested` })
        }
        const argsBytes = Buffer.byteLength(m.args, "utf8")
        if (argsBytes > SANDBOX_MAX_ARGS_BYTES) {
          return yield* refuse(name, {
            code: "payload_too_large",
            message: `the arguments are ${argsBytes} bytes of JSON; the limit is ${SANDBOX_MAX_ARGS_BYTES}`,
            what: "arguments",
            limit: SANDBOX_MAX_ARGS_BYTES,
            actual: argsBytes,
            unit: "bytes"
          })
        }
        let args: unknown
        try {
          args = JSON.parse(m.args)
        } catch {
          return yield* refuse(name, { code: "validation_error", message: "arguments are not JSON", detail: "arguments are not JSON" })
        }
        const outcome = yield* host.invoke(name, args)
        if (outcome.ok) return yield* reply(true, stripEnvelope(outcome.body))
        return yield* refuse(name, outcome.body.error as RefusalBody)
      })
    }

    return {
      inFlight: (count: number) => {
        inFlight += count
      },
      start: (call: HostCall) =>
        Effect.map(FiberSet.run(fibers, handle(call)), (fiber) => {
          if (guard === undefined) return
          guard.calls.add(fiber)
          fiber.addObserver(() => guard.calls.delete(fiber))
        }),
      stop: FiberSet.clear(fibers),
      refused
    }
  })
