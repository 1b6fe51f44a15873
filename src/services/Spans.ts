import { Effect, FiberRef } from "effect"

/**
 * A public service method as its named span, without the call-site stack trace `Effect.fn` captures on
 * every call (measured 16–41 µs a call, more than some methods' statements). The body is usually an
 * `Effect.fnUntraced`; the span is opened around what it returns, and only while the tracer is on: with
 * nothing exporting spans (the daemon without an OTLP endpoint), a no-op span would still be made and put
 * into the method's context on every call.
 */
export const spanned = <Args extends ReadonlyArray<any>, A, E, R>(
  name: string,
  body: (...args: Args) => Effect.Effect<A, E, R>
) =>
(...args: Args): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) =>
    fiber.getFiberRef(FiberRef.currentTracerEnabled)
      ? Effect.withSpan(body(...args), name, { captureStackTrace: false })
      : body(...args)
  )
