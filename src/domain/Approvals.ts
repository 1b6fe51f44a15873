import { Schema } from "effect"
import canonicalize from "canonicalize"
import { createHash } from "node:crypto"

/**
 * Approvals: a permission for one call — one connection, one tool, one exact set of arguments — that an
 * assistant's write or anyone's elevated call waits for. Plain writes may be approved through MCP
 * elicitation; elevated calls only through the owner's channel (the CLI, the portal).
 */

export const APPROVAL_STATUSES = ["pending", "approved", "denied", "executed"] as const
export const ApprovalStatus = Schema.Literal(...APPROVAL_STATUSES)
export type ApprovalStatus = typeof ApprovalStatus.Type

/** The argument every write and elevated tool accepts besides its own (added by the registry). */
export const ApprovalArgs = Schema.Struct({
  approval_id: Schema.optional(Schema.String.pipe(Schema.maxLength(128))).annotations({
    description: "from approval_required"
  })
})

/** An approval as the owner's channel lists it. */
export const ApprovalInfo = Schema.Struct({
  approval_id: Schema.String,
  status: ApprovalStatus,
  tool: Schema.String,
  access: Schema.String,
  user_name: Schema.String,
  connection_id: Schema.String,
  connection_name: Schema.String,
  args: Schema.Unknown,
  args_hash: Schema.String,
  created_at: Schema.String,
  decided_at: Schema.NullOr(Schema.String),
  decided_via: Schema.NullOr(Schema.String),
  executed_at: Schema.NullOr(Schema.String)
})
export type ApprovalInfo = typeof ApprovalInfo.Type

/** The arguments an approval is bound to: everything but `approval_id` itself. */
export const boundArgs = (args: unknown): Record<string, unknown> => {
  if (typeof args !== "object" || args === null || Array.isArray(args)) return {}
  const { approval_id: _ignored, ...rest } = args as Record<string, unknown>
  return rest
}

/** SHA-256 of the canonical JSON (RFC 8785) of the bound arguments. */
export const argsHash = (args: unknown): string =>
  createHash("sha256").update(canonicalize(boundArgs(args)) ?? "{}").digest("hex")

/** What an elicitation prompt came back with (`cancel` also covers a client that failed to answer). */
export type ElicitAnswer = "accept" | "decline" | "cancel"

/** The longest `sophia.approval_status` waits for a decision (`wait_s`). */
export const APPROVAL_STATUS_WAIT_MAX_S = 60

export const ApprovalStatusInput = Schema.Struct({
  approval_id: Schema.String.pipe(Schema.maxLength(128)).annotations({ description: "from approval_required" }),
  wait_s: Schema.optional(Schema.Number.pipe(Schema.between(0, APPROVAL_STATUS_WAIT_MAX_S))).annotations({
    description: "long poll while pending"
  })
})
export type ApprovalStatusInput = typeof ApprovalStatusInput.Type

/** Where an approval stands; `approved` = repeat the call with `approval_id` (it runs once). */
export const ApprovalStatusResult = Schema.Struct({
  approval_id: Schema.String,
  tool: Schema.String,
  status: ApprovalStatus,
  decided_at: Schema.optional(Schema.String),
  hint: Schema.optional(Schema.String)
})
export type ApprovalStatusResult = typeof ApprovalStatusResult.Type
