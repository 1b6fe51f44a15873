import { Config, Effect } from "effect"
import type { CoordinationLimits, PostInput } from "../../domain/Coordination.js"
import { DEFAULT_COORDINATION_LIMITS as DEFAULTS } from "../../domain/Coordination.js"
import { PayloadTooLarge, ValidationError } from "../../domain/Errors.js"

/**
 * A post's limits and validation, before anything is written: the sizes (body, payload and its depth,
 * references) and the closeout's `review_requested` rule. The limits are configuration
 * (`SOPHIA_POST_*`); the inbox's largest page (`SOPHIA_INBOX_LIMIT_MAX`) is read here with them. The
 * service hands them out (`Coordination.limits`): the tools' schemas advertise exactly these.
 */

/** Nesting depth of a JSON value (a scalar is 0, `{}` is 1); stops counting past `cap` (cycles, abuse). */
const jsonDepth = (value: unknown, cap: number): number => {
  if (value === null || typeof value !== "object") return 0
  if (cap <= 0) return 1
  let deepest = 0
  for (const v of Object.values(value as object)) {
    const d = jsonDepth(v, cap - 1)
    if (d > deepest) deepest = d
    if (deepest >= cap) break
  }
  return 1 + deepest
}

const intConfig = (name: string, fallback: number) => Config.integer(name).pipe(Config.withDefault(fallback))

/** What a post's checks produce: its stored JSON texts and the closeout's review flag (null for other kinds). */
export interface CheckedPost {
  readonly refsJson: string
  readonly payloadJson: string | null
  readonly reviewRequested: boolean | null
}

export const makePostValidation = Effect.gen(function*() {
  const limits: CoordinationLimits = yield* Effect.orDie(Config.all({
    bodyBytes: intConfig("SOPHIA_POST_BODY_MAX_BYTES", DEFAULTS.bodyBytes),
    payloadBytes: intConfig("SOPHIA_POST_PAYLOAD_MAX_BYTES", DEFAULTS.payloadBytes),
    payloadDepth: intConfig("SOPHIA_POST_PAYLOAD_MAX_DEPTH", DEFAULTS.payloadDepth),
    references: intConfig("SOPHIA_POST_REFERENCES_MAX", DEFAULTS.references),
    referenceChars: intConfig("SOPHIA_POST_REFERENCE_MAX_CHARS", DEFAULTS.referenceChars),
    inboxLimit: intConfig("SOPHIA_INBOX_LIMIT_MAX", DEFAULTS.inboxLimit)
  }))

  /** Refusals: `PayloadTooLarge`, `ValidationError`. */
  const validate = (input: PostInput): Effect.Effect<CheckedPost, PayloadTooLarge | ValidationError> =>
    Effect.gen(function*() {
      const bodyBytes = Buffer.byteLength(input.body, "utf8")
      if (bodyBytes > limits.bodyBytes) {
        return yield* new PayloadTooLarge({ what: "body", limit: limits.bodyBytes, actual: bodyBytes, unit: "bytes" })
      }
      if (input.body.trim().length === 0) return yield* new ValidationError({ detail: "body: must not be blank" })
      const refs = input.references ?? []
      if (refs.length > limits.references) {
        return yield* new PayloadTooLarge({
          what: "references",
          limit: limits.references,
          actual: refs.length,
          unit: "items"
        })
      }
      for (const [i, ref] of refs.entries()) {
        if (ref.length > limits.referenceChars) {
          return yield* new PayloadTooLarge({
            what: `references[${i}]`,
            limit: limits.referenceChars,
            actual: ref.length,
            unit: "characters"
          })
        }
        if (ref.trim().length === 0) return yield* new ValidationError({ detail: `references[${i}]: must not be blank` })
      }
      let reviewRequested: boolean | null = null
      const rawCloseout = input.payload?.closeout
      const payloadCloseout = typeof rawCloseout === "object" && rawCloseout !== null && !Array.isArray(rawCloseout)
        ? rawCloseout as { readonly review_requested?: unknown }
        : undefined
      const fromPayload = payloadCloseout?.review_requested
      if (input.kind === "closeout") {
        const given = input.closeout?.review_requested ?? fromPayload
        if (typeof given !== "boolean") {
          return yield* new ValidationError({
            detail: "closeout.review_requested (a boolean) is required on a closeout; it is never inferred"
          })
        }
        if (input.closeout !== undefined && fromPayload !== undefined && fromPayload !== input.closeout.review_requested) {
          return yield* new ValidationError({ detail: "closeout.review_requested and payload.closeout.review_requested disagree" })
        }
        reviewRequested = given
      } else if (input.closeout !== undefined) {
        return yield* new ValidationError({ detail: `closeout: only a closeout post carries it (kind is ${input.kind})` })
      }
      const payload = reviewRequested === null
        ? input.payload
        : { ...input.payload, closeout: { ...payloadCloseout, review_requested: reviewRequested } }
      let payloadJson: string | null = null
      if (payload !== undefined) {
        const depth = jsonDepth(payload, limits.payloadDepth + 1)
        if (depth > limits.payloadDepth) {
          return yield* new ValidationError({ detail: `payload: nests deeper than ${limits.payloadDepth} levels` })
        }
        payloadJson = JSON.stringify(payload)
        const bytes = Buffer.byteLength(payloadJson, "utf8")
        if (bytes > limits.payloadBytes) {
          return yield* new PayloadTooLarge({ what: "payload", limit: limits.payloadBytes, actual: bytes, unit: "bytes (JSON)" })
        }
      }
      return { refsJson: JSON.stringify(refs), payloadJson, reviewRequested }
    })

  return { validate, limits } as const
})
