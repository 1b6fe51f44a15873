/**
 * Tracing costs nothing when nothing exports it: without an OTLP endpoint the daemon's TracingLive switches
 * the tracer off, so every span (the tool call's, each service's `Effect.fn`) is a no-op span — no span
 * object recorded, no call-site stack captured. With an endpoint the spans are real (exported over OTLP:
 * test/e2e/Observability.test.ts follows one to the collector).
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { TracingLive, tracesUrlFrom } from "../src/observability/Tracing.js"
import { spanned } from "../src/services/Spans.js"

const spanInside = Effect.gen(function*() {
  const traced = Effect.fn("Service.method")(function*() {
    return yield* Effect.currentSpan
  })
  return yield* traced().pipe(Effect.withSpan("Dispatcher.call"))
})

const withEnv = (env: Record<string, string>) =>
  Layer.provide(TracingLive({ name: "sophia", version: "test" }), Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("tracing", () => {
  it.effect("no OTLP endpoint: spans are no-ops (nothing recorded, not sampled)", () =>
    Effect.gen(function*() {
      const span = yield* spanInside.pipe(Effect.provide(withEnv({})))
      assert.strictEqual(span.sampled, false)
      assert.strictEqual(span.spanId, "noop")
    }))

  it.effect("an OTLP endpoint: spans are real, the service's under the tool call's", () =>
    Effect.gen(function*() {
      // a collector that accepts everything (the exporter flushes to it when the layer closes)
      const collector = yield* Effect.acquireRelease(
        Effect.async<http.Server>((resume) => {
          const server = http.createServer((req, res) => req.resume().on("end", () => res.writeHead(200).end("{}")))
          server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
        }),
        (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
      )
      const port = (collector.address() as AddressInfo).port
      const span = yield* spanInside.pipe(
        Effect.provide(withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` }))
      )
      assert.strictEqual(span.name, "Service.method")
      assert.notStrictEqual(span.spanId, "noop")
      const parent = Option.getOrThrow(span.parent)
      assert.strictEqual(parent._tag, "Span")
      assert.strictEqual((parent as { name?: string }).name, "Dispatcher.call")
    }).pipe(Effect.scoped))

  it.effect("a service method's span (spanned) exists only while the tracer is on", () =>
    Effect.gen(function*() {
      const method = spanned("Service.method", () => Effect.option(Effect.currentSpan))
      const on = Option.getOrThrow(yield* method())
      assert.strictEqual(on.name, "Service.method")
      // off: not even a no-op span is made; the method runs in its caller's span context
      const off = yield* method().pipe(Effect.withTracerEnabled(false))
      assert.isTrue(Option.isNone(off))
      const inCaller = yield* method().pipe(Effect.withTracerEnabled(false), Effect.withSpan("caller"))
      assert.strictEqual(Option.map(inCaller, (span) => span.name).pipe(Option.getOrUndefined), "caller")
    }))

  it("the traces URL: the traces endpoint as is, else the base endpoint + /v1/traces, else none", () => {
    assert.strictEqual(tracesUrlFrom(undefined, undefined), undefined)
    assert.strictEqual(tracesUrlFrom("http://c:4318/", undefined), "http://c:4318/v1/traces")
    assert.strictEqual(tracesUrlFrom("http://c:4318", "http://t/x"), "http://t/x")
  })
})
