import { Effect } from "effect"
import {
  CancelWaitInput,
  CancelWaitResult,
  DeclareWaitInput,
  DeclareWaitResult,
  WAIT_EDGE_COMPACT,
  WaitEdge,
  WaitGraphInput,
  WaitGraphResult
} from "../../domain/Waits.js"
import { Waits } from "../../services/Waits.js"
import { APPEND_ONLY, defineTool, READ_ONLY } from "../Registry.js"

export const waitTools = Effect.gen(function*() {
  const waits = yield* Waits
  return [
    defineTool({
      name: "sophia.declare_wait",
      group: "coordination",
      access: "coordinate",
      description: "Declare you are blocked on a connection until a predicate holds; posted fleet-wide, resolved " +
        "three ways. Refuses a cycle.",
      annotations: APPEND_ONLY,
      input: DeclareWaitInput,
      output: DeclareWaitResult,
      handler: (input, { caller }) => waits.declare(caller, input)
    }),
    defineTool({
      name: "sophia.cancel_wait",
      group: "coordination",
      access: "coordinate",
      description: "Withdraw one of your open waits.",
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
      input: CancelWaitInput,
      output: CancelWaitResult,
      handler: (input, { caller }) => waits.cancel(caller, input.wait_id)
    }),
    defineTool({
      name: "sophia.wait_graph",
      group: "coordination",
      access: "read",
      description: "Who waits on whom: open waits as edges, cycles, and orphans (waits and claims of revoked or silent connections).",
      annotations: READ_ONLY,
      input: WaitGraphInput,
      output: WaitGraphResult,
      projection: { key: "edges", row: WaitEdge, compact: WAIT_EDGE_COMPACT },
      handler: (_input, { caller }) => waits.graph(caller)
    })
  ]
})
