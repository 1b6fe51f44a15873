import { Schema } from "effect"

/**
 * Refusals shared by every part of the surface. Each is a typed error in the error channel; the MCP
 * layer maps each tag, once, to its stable code (src/mcp/Refusals.ts; docs/architecture.md, "Refusal codes").
 */

export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {}) {
  override get message() {
    return "Authentication required. Provide a valid Bearer token."
  }
}

export class ForbiddenProfile extends Schema.TaggedError<ForbiddenProfile>()("ForbiddenProfile", {
  tool: Schema.String,
  profile: Schema.String,
  access: Schema.String
}) {
  override get message() {
    return `a ${this.profile} connection may not call ${this.tool} (access class ${this.access})`
  }
}

export class ApprovalRequired extends Schema.TaggedError<ApprovalRequired>()("ApprovalRequired", {
  tool: Schema.String,
  approval_id: Schema.optional(Schema.String),
  reason: Schema.String,
  /** what to do next (wait with sophia.approval_status, then repeat the call with approval_id) */
  hint: Schema.optional(Schema.String)
}) {
  override get message() {
    return `${this.tool} needs an approval before it runs: ${this.reason}`
  }
}

export class ApprovalDenied extends Schema.TaggedError<ApprovalDenied>()("ApprovalDenied", {
  tool: Schema.String,
  approval_id: Schema.String
}) {
  override get message() {
    return `the owner denied approval ${this.approval_id} for ${this.tool}`
  }
}

export class OwnerApprovalRequired extends Schema.TaggedError<OwnerApprovalRequired>()("OwnerApprovalRequired", {
  tool: Schema.String,
  approval_id: Schema.optional(Schema.String),
  reason: Schema.String,
  /** what to do next (wait with sophia.approval_status, then repeat the call with approval_id) */
  hint: Schema.optional(Schema.String)
}) {
  override get message() {
    return `${this.tool} is elevated and needs the owner's explicit approval: ${this.reason}`
  }
}

export class ValidationError extends Schema.TaggedError<ValidationError>()("ValidationError", {
  detail: Schema.String
}) {
  override get message() {
    return this.detail
  }
}

/**
 * Argument keys the tool does not define (a misspelled key would otherwise be ignored, and the call answer
 * as if it had not been given: a wrong answer that looks right). Code `validation_error`.
 */
export class UnknownArguments extends Schema.TaggedError<UnknownArguments>()("UnknownArguments", {
  tool: Schema.String,
  unknown: Schema.Array(Schema.String),
  /** for each unknown key close enough to a valid one, that key */
  did_you_mean: Schema.Record({ key: Schema.String, value: Schema.String }),
  valid_keys: Schema.Array(Schema.String)
}) {
  override get message() {
    const each = this.unknown.map((k) => this.did_you_mean[k] !== undefined ? `${k} (did you mean ${this.did_you_mean[k]}?)` : k)
    const takes = this.valid_keys.length > 0 ? `it takes: ${this.valid_keys.join(", ")}` : "it takes no arguments"
    return `${this.tool} does not take ${each.join(", ")}; ${takes}. Nothing was done: repeat the call with valid keys only`
  }
}

export class UnknownFields extends Schema.TaggedError<UnknownFields>()("UnknownFields", {
  unknown: Schema.Array(Schema.String),
  valid_keys: Schema.Array(Schema.String)
}) {
  override get message() {
    return `unknown field(s) ${this.unknown.join(", ")}; valid keys: ${this.valid_keys.join(", ")}`
  }
}

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  what: Schema.String,
  id: Schema.String,
  suggestions: Schema.optional(Schema.Array(Schema.String))
}) {
  override get message() {
    const hint = this.suggestions && this.suggestions.length > 0 ? `; did you mean ${this.suggestions.join(", ")}?` : ""
    return `no ${this.what} ${JSON.stringify(this.id)}${hint}`
  }
}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  what: Schema.String,
  limit: Schema.Number,
  actual: Schema.Number,
  unit: Schema.String
}) {
  override get message() {
    return `${this.what} is ${this.actual} ${this.unit}; the limit is ${this.limit} ${this.unit}`
  }
}

export class UnknownRecipient extends Schema.TaggedError<UnknownRecipient>()("UnknownRecipient", {
  selector: Schema.String
}) {
  override get message() {
    return `no live connection of yours matches ${JSON.stringify(this.selector)} (a full id, an 8-character short id, or a name)`
  }
}

export class AmbiguousRecipient extends Schema.TaggedError<AmbiguousRecipient>()("AmbiguousRecipient", {
  selector: Schema.String,
  candidates: Schema.Array(Schema.Struct({ connection_id: Schema.String, name: Schema.String }))
}) {
  override get message() {
    return `${JSON.stringify(this.selector)} matches ${this.candidates.length} connections; use the full connection id`
  }
}

/**
 * A per-connection cap is reached (parked long polls, parked approval polls, pending approvals,
 * concurrent `execute_code` runs): nothing was done; the same call succeeds once the connection holds
 * fewer. `setting` names the variable that raises the cap.
 */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  what: Schema.String,
  limit: Schema.Number,
  retry_after_s: Schema.Number,
  setting: Schema.String,
  hint: Schema.String
}) {
  override get message() {
    return `this connection already holds ${this.limit} ${this.what} (the limit, ${this.setting}); retry in ${this.retry_after_s} s — ${this.hint}`
  }
}

/**
 * The store could not run the write without a conflict after retrying it (a serialization failure or a
 * deadlock between concurrent writers): nothing was written; the same call may simply be repeated.
 */
export class Busy extends Schema.TaggedError<Busy>()("Busy", {
  attempts: Schema.Number,
  retry_after_s: Schema.Number
}) {
  override get message() {
    return `the store was too contended to commit this write (${this.attempts} attempts, each rolled back: nothing was written); repeat the call in ${this.retry_after_s} s`
  }
}
