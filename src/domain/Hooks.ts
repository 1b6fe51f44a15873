import { Config, Schema } from "effect"

/**
 * Hooks of agent runtimes: the moments a runtime lets the daemon tell its agent something. Claude Code
 * sends each hook's input as JSON (on stdin to a command hook, as the body of an HTTP hook's POST) and
 * reads the output JSON back. The daemon reads the few fields below and ignores the rest (`cwd`,
 * `transcript_path`, `permission_mode`, `prompt`, `tool_name`, `tool_input`, `tool_response`,
 * `last_assistant_message`, … are accepted as they come).
 */

/** The events the daemon answers; any other event is answered `{}`. */
export const HOOK_EVENTS = ["SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SubagentStop"] as const
export type HookEvent = typeof HOOK_EVENTS[number]

export const ClaudeCodeHookInput = Schema.Struct({
  hook_event_name: Schema.String,
  session_id: Schema.optional(Schema.String),
  /** Stop / SubagentStop: the agent is already continuing because a Stop hook blocked */
  stop_hook_active: Schema.optional(Schema.Boolean),
  /** SubagentStop (and events inside a subagent): the subagent */
  agent_id: Schema.optional(Schema.String)
})
export type ClaudeCodeHookInput = typeof ClaudeCodeHookInput.Type

/** What Claude Code reads back: nothing to say, context for the agent, or a stop refused with its reason. */
export type HookOutput =
  | { readonly hookSpecificOutput?: undefined; readonly decision?: undefined }
  | { readonly hookSpecificOutput: { readonly hookEventName: HookEvent; readonly additionalContext: string } }
  | { readonly decision: "block"; readonly reason: string }

/** How many blocks in a row a Stop hook may give while the agent is already continuing because of one. */
export const hookMaxContinuesConfig = Config.integer("SOPHIA_HOOK_MAX_CONTINUES").pipe(
  Config.validate({ message: "SOPHIA_HOOK_MAX_CONTINUES must be 0 or more", validation: (n) => n >= 0 }),
  Config.withDefault(3)
)
