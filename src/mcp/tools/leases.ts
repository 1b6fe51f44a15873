import { Effect } from "effect"
import {
  LEASE_ROW_COMPACT,
  LeaseAcquireInput,
  LeaseGrant,
  LeaseReleaseInput,
  LeaseReleaseResult,
  LeaseRenewInput,
  LeaseRenewResult,
  LeaseRow,
  LeasesInput,
  LeasesResult
} from "../../domain/Leases.js"
import { Leases } from "../../services/Leases.js"
import { defineTool, READ_ONLY } from "../Registry.js"

const WRITES = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false } as const

/** The `leases` group: files and slots an agent holds for a while. */
export const leaseTools = Effect.gen(function*() {
  const leases = yield* Leases
  return [
    defineTool({
      name: "sophia.lease_acquire",
      group: "leases",
      access: "coordinate",
      description: "Hold paths or slots, all or nothing, else lease_conflict names the holders; takes over orphaned leases.",
      annotations: WRITES,
      input: LeaseAcquireInput,
      output: LeaseGrant,
      handler: (input, { caller }) => leases.acquire(caller, input)
    }),
    defineTool({
      name: "sophia.lease_renew",
      group: "leases",
      access: "coordinate",
      description: "Extend your lease from now.",
      annotations: WRITES,
      input: LeaseRenewInput,
      output: LeaseRenewResult,
      handler: (input, { caller }) => leases.renew(caller, input)
    }),
    defineTool({
      name: "sophia.lease_release",
      group: "leases",
      access: "coordinate",
      description: "End your lease.",
      annotations: WRITES,
      input: LeaseReleaseInput,
      output: LeaseReleaseResult,
      handler: (input, { caller }) => leases.release(caller, input.lease_id)
    }),
    defineTool({
      name: "sophia.leases",
      group: "leases",
      access: "read",
      description: "Active leases with holder, orphaned, took_over.",
      annotations: READ_ONLY,
      input: LeasesInput,
      output: LeasesResult,
      projection: { key: "leases", row: LeaseRow, compact: LEASE_ROW_COMPACT },
      handler: (input, { caller }) => leases.list(caller, input)
    })
  ]
})
