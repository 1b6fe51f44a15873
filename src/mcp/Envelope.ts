import { Context, Effect, Layer } from "effect"
import type { Caller } from "../domain/Auth.js"
import type { EnvelopeFields } from "../domain/Envelope.js"

/**
 * The hook that fills the fields every response carries (`_inbox_unread`, `_blocking`,
 * `_wait_resolved`). Services provide it (src/layers/App.ts wires Coordination and Waits in); the MCP
 * layer only splices the result into each reply.
 */
export class Envelope extends Context.Tag("sophia/Envelope")<Envelope, {
  /**
   * The fields for one response. `deliver: false` (calls made from inside execute_code) leaves
   * once-only signals (`_wait_resolved`) for the outer response, so the agent itself receives them.
   */
  readonly fields: (caller: Caller, options?: { readonly deliver?: boolean }) => Effect.Effect<EnvelopeFields>
}>() {
  /** Before any service counts anything: nothing is unread, nothing is blocking. */
  static readonly Empty = Layer.succeed(Envelope, { fields: () => Effect.succeed({ _inbox_unread: 0 }) })
}
