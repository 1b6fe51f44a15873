/**
 * What the one call path (Dispatcher.call) does around every call, besides the call itself: one metric
 * update, one `info` line (only when the level lets it through), and refusal bodies built from the
 * refusal's own fields — the same whether the refusal failed inside a span or not.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel, Metric } from "effect"
import { NotFound, ValidationError } from "../src/domain/Errors.js"
import { SophiaTest } from "../src/layers/App.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { refusalBody } from "../src/mcp/Refusals.js"
import { RequestLogOn } from "../src/observability/Metrics.js"
import { connect } from "./support/Fixtures.js"

interface Line {
  readonly level: string
  readonly message: unknown
  readonly annotations: Record<string, unknown>
}

const capturing = (lines: Array<Line>) =>
  Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ annotations, logLevel, message }) => {
      lines.push({ level: logLevel.label, message, annotations: Object.fromEntries(annotations) })
    })
  )

const callCount = (tool: string, outcome: string) =>
  Effect.map(Metric.snapshot, (pairs) =>
    pairs
      .filter((p) => p.metricKey.name === "sophia_tool_calls_total")
      .filter((p) => p.metricKey.tags.some((t) => t.key === "tool" && t.value === tool))
      .filter((p) => p.metricKey.tags.some((t) => t.key === "outcome" && t.value === outcome))
      .reduce((n, p) => n + Number((p.metricState as { count?: number }).count ?? 0), 0))

describe("the call path", () => {
  it.effect("one info line per call (tool, outcome, ms, connection); none when the level drops info", () =>
    Effect.gen(function*() {
      const lines: Array<Line> = []
      const { caller } = yield* connect("logged", "full")
      const dispatcher = yield* Dispatcher
      yield* dispatcher.call(caller, "sophia.orient", {}).pipe(Effect.provide(capturing(lines)))
      yield* dispatcher.call(caller, "sophia_nope", {}).pipe(Effect.provide(capturing(lines)))
      yield* dispatcher.call(caller, "sophia.orient", {}).pipe(
        Logger.withMinimumLogLevel(LogLevel.Warning),
        Effect.provide(capturing(lines))
      )
      const calls = lines.filter((l) => Array.isArray(l.message) && l.message[0] === "tool call")
      assert.deepStrictEqual(
        calls.map((l) => [l.level, l.annotations.tool, l.annotations.outcome, l.annotations.connection]),
        [
          ["INFO", "sophia.orient", "ok", caller.connectionShort],
          ["INFO", "unknown", "not_found", caller.connectionShort]
        ]
      )
      assert.isNumber(calls[0].annotations.ms)
      assert.isUndefined(calls[0].annotations.via)
    }).pipe(Effect.provide(SophiaTest.pipe(Layer.provide(RequestLogOn)))))

  it.effect("every finished call counts once under its tool and outcome", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("counted", "observer")
      const dispatcher = yield* Dispatcher
      const ok = yield* callCount("sophia.orient", "ok")
      const forbidden = yield* callCount("sophia.coordination_post", "forbidden_profile")
      yield* dispatcher.call(caller, "sophia.orient", {})
      yield* dispatcher.call(caller, "sophia_coordination_post", { channel: "c", kind: "status", body: "x" })
      assert.strictEqual((yield* callCount("sophia.orient", "ok")) - ok, 1)
      assert.strictEqual((yield* callCount("sophia.coordination_post", "forbidden_profile")) - forbidden, 1)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("an unknown tool's suggestions are the same on every call", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("guesser", "full")
      const dispatcher = yield* Dispatcher
      const first = yield* dispatcher.call(caller, "sophia_orientt", {})
      const again = yield* dispatcher.call(caller, "sophia_orientt", {})
      assert.isFalse(first.ok)
      assert.deepStrictEqual(again.body, first.body)
      assert.include((first.body.error as unknown as { suggestions: Array<string> }).suggestions, "sophia.orient")
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("a refusal failed inside a span has the same body, and its stack is never formatted for it", () =>
    Effect.gen(function*() {
      const refusals = [
        new NotFound({ what: "tool", id: "x", suggestions: ["sophia.orient"] }),
        new ValidationError({ detail: "bad" })
      ]
      for (const refusal of refusals) {
        // inside a span, Effect hands the failure on wrapped in its span-annotation Proxy
        const failed = yield* Effect.flip(Effect.withSpan(Effect.fail(refusal), "inside"))
        const previous = Error.prepareStackTrace
        let formatted = 0
        Error.prepareStackTrace = (error, frames) => {
          formatted++
          return previous ? previous(error, frames) : String(error)
        }
        try {
          assert.deepStrictEqual(refusalBody(failed), refusalBody(refusal))
        } finally {
          Error.prepareStackTrace = previous
        }
        assert.strictEqual(formatted, 0)
      }
      assert.deepStrictEqual(refusalBody(refusals[0]), {
        code: "not_found",
        message: "no tool \"x\"; did you mean sophia.orient?",
        what: "tool",
        id: "x",
        suggestions: ["sophia.orient"]
      })
    }))
})
