import { Effect } from "effect"
import { ApprovalStatusInput, ApprovalStatusResult } from "../../domain/Approvals.js"
import { Approvals } from "../../services/Approvals.js"
import { defineTool, READ_ONLY } from "../Registry.js"

/** `sophia.approval_status`: wait for the owner's decision on a refused call without polling. */
export const approvalTools = Effect.gen(function*() {
  const approvals = yield* Approvals
  return [
    defineTool({
      name: "sophia.approval_status",
      group: "system",
      access: "read",
      description: "Status of an approval; wait_s long-polls the owner's decision. Approved: repeat your call with approval_id.",
      annotations: READ_ONLY,
      input: ApprovalStatusInput,
      output: ApprovalStatusResult,
      handler: (input, { caller }) => approvals.status(caller, input)
    })
  ]
})
