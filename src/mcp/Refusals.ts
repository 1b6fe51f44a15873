import { Unauthenticated } from "../domain/Errors.js"
import type * as E from "../domain/Errors.js"
import type * as K from "../domain/Knowledge.js"
import type * as L from "../domain/Ledger.js"
import type * as LS from "../domain/Leases.js"
import type * as S from "../domain/Sandbox.js"
import type * as W from "../domain/Waits.js"

/**
 * Every refusal a tool can return. A service adds its refusals here and to `CODES`; the compiler then
 * insists the mapping stays total.
 */
export type Refusal =
  | E.Unauthenticated
  | E.ForbiddenProfile
  | E.ApprovalRequired
  | E.ApprovalDenied
  | E.OwnerApprovalRequired
  | E.ValidationError
  | E.UnknownFields
  | E.UnknownArguments
  | E.NotFound
  | E.PayloadTooLarge
  | E.UnknownRecipient
  | E.AmbiguousRecipient
  | E.RateLimited
  | E.Busy
  | K.InvalidGroundingSource
  | L.HeadMoved
  | L.EvidenceDowngrade
  | L.SelfCertification
  | L.InvalidTransition
  | S.SandboxTimeout
  | S.SandboxMemoryLimit
  | S.SandboxCallCap
  | S.SandboxError
  | S.InnerRefusal
  | W.WaitCycle
  | LS.LeaseConflict

/** The stable codes (docs/architecture.md, "Refusal codes"; docs/refusal-codes.md), one per refusal tag, and the HTTP status of the REST path. */
const CODES: { readonly [K in Refusal["_tag"]]: readonly [code: string, httpStatus: number] } = {
  Unauthenticated: ["unauthenticated", 401],
  ForbiddenProfile: ["forbidden_profile", 403],
  ApprovalRequired: ["approval_required", 403],
  ApprovalDenied: ["approval_denied", 403],
  OwnerApprovalRequired: ["owner_approval_required", 403],
  ValidationError: ["validation_error", 400],
  UnknownFields: ["unknown_fields", 400],
  UnknownArguments: ["validation_error", 400],
  NotFound: ["not_found", 404],
  PayloadTooLarge: ["payload_too_large", 413],
  UnknownRecipient: ["unknown_recipient", 400],
  AmbiguousRecipient: ["ambiguous_recipient", 400],
  RateLimited: ["rate_limited", 429],
  Busy: ["busy", 503],
  InvalidGroundingSource: ["invalid_grounding_source", 422],
  HeadMoved: ["head_moved", 409],
  EvidenceDowngrade: ["evidence_downgrade", 409],
  SelfCertification: ["self_certification", 403],
  InvalidTransition: ["invalid_transition", 409],
  SandboxTimeout: ["sandbox_timeout", 408],
  SandboxMemoryLimit: ["sandbox_memory_limit", 422],
  SandboxCallCap: ["sandbox_call_cap", 429],
  SandboxError: ["sandbox_error", 422],
  // an inner call's refusal passed through by execute_code: refusalBody uses its own `code`
  InnerRefusal: ["sandbox_error", 422],
  WaitCycle: ["wait_cycle", 409],
  LeaseConflict: ["lease_conflict", 409]
}

export interface RefusalBody {
  readonly code: string
  readonly message: string
  readonly [detail: string]: unknown
}

/**
 * `{ code, message, ...details }`: the refusal's own fields are its details. Read by name from
 * `Reflect.ownKeys`, not `Object.entries`: a refusal failed inside a span reaches here wrapped in Effect's
 * span-annotation Proxy, where enumerating asks for every own property's descriptor — `stack` included,
 * which makes V8 format the error's stack trace (tens of µs per refusal) only to skip it.
 */
export const refusalBody = (refusal: Refusal): RefusalBody => {
  if (refusal._tag === "InnerRefusal") return { ...refusal.details, code: refusal.code, message: refusal.message }
  const details: Record<string, unknown> = {}
  for (const key of Reflect.ownKeys(refusal)) {
    if (typeof key !== "string" || key === "_tag" || key === "message" || key === "stack" || key === "cause") continue
    if (!Object.prototype.propertyIsEnumerable.call(refusal, key)) continue
    const value = (refusal as unknown as Record<string, unknown>)[key]
    if (value !== undefined) details[key] = value
  }
  return { code: CODES[refusal._tag][0], message: refusal.message, ...details }
}

export const httpStatusOf = (refusal: Refusal): number => CODES[refusal._tag][1]


export const AUTH_MESSAGE = new Unauthenticated().message
