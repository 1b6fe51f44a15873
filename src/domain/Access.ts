import type { AccessClass, AccessDecision, Caller } from "./Auth.js"

/**
 * docs/architecture.md, "Profiles and access", as data. The one table every tool call passes through
 * (`Auth.authorize`); catalogs and `tools/list` advertise what is not `forbidden`.
 */
const RULES: Record<Caller["profile"], Record<AccessClass, AccessDecision>> = {
  observer: { read: "allow", coordinate: "forbidden", write: "forbidden", elevated: "forbidden" },
  assistant: { read: "allow", coordinate: "allow", write: "approval", elevated: "owner_approval" },
  full: { read: "allow", coordinate: "allow", write: "allow", elevated: "owner_approval" },
  portal: { read: "allow", coordinate: "allow", write: "allow", elevated: "allow" }
}

export const decideAccess = (profile: Caller["profile"], access: AccessClass): AccessDecision => RULES[profile][access]
