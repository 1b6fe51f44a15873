import { Effect } from "effect"
import { EXECUTE_CODE_TOOL, ExecuteCodeInput, ExecuteCodeOutput } from "../../domain/Sandbox.js"
import { Sandbox } from "../../services/Sandbox.js"
import { defineTool } from "../Registry.js"
import { camelMapping } from "../SdkTypes.js"

/** `sophia.execute_code`: one round trip for many composed calls, each checked as the caller. */
export const sandboxTools = Effect.gen(function*() {
  const sandbox = yield* Sandbox
  return [
    defineTool({
      name: EXECUTE_CODE_TOOL,
      group: "system",
      // each inner call is authorized on its own, as the calling connection
      access: "read",
      description: "Use this by default for 3+ Sophia reads or a read-modify-write: run TypeScript (body of an async " +
        "function; return plain JSON) where sophia.<camelCaseTool>(args) calls any tool as you; compose with " +
        "Promise.all, keep intermediate data out of the chat. A refused inner call throws an Error with .code " +
        "(uncaught: this call's refusal). Limits: 50 calls, 8 MB, timeout_ms 10000 (max 30000); console.log → logs.",
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
      input: ExecuteCodeInput,
      output: ExecuteCodeOutput,
      // a nested execute_code is refused by the service (a snippet calling it never reaches the dispatcher)
      handler: (input, context) =>
        sandbox.run(input, {
          invoke: context.invoke,
          methods: camelMapping(context.toolNames),
          owner: { userId: context.caller.userId, connectionId: context.caller.connectionId }
        })
    })
  ]
})
