import { Effect, Schema } from "effect"
import type { Caller } from "../domain/Auth.js"
import { ValidationError } from "../domain/Errors.js"
import type { HookEvent, HookOutput } from "../domain/Hooks.js"
import { ClaudeCodeHookInput, hookMaxContinuesConfig } from "../domain/Hooks.js"
import { Coordination } from "./Coordination.js"
import { makeBrief } from "./hooks/Brief.js"
import { deliveryText, stopReason } from "./hooks/Render.js"
import { makeStreaks } from "./hooks/Streaks.js"
import { spanned } from "./Spans.js"
import { Waits } from "./Waits.js"

/**
 * Hooks: what an agent runtime's hooks are told, decided here whole (the HTTP route `POST /hooks/claude-code`
 * and the CLI's command hook only carry the input in and the output out). Owns `hook_stop_streaks`; asks
 * Coordination (posts delivered and marked read `via: "hook"`), Waits (resolutions delivered), the Ledger and
 * Approvals (the brief) through their methods.
 * - `SessionStart`: the brief (`hooks/Brief.ts`); nothing marked.
 * - `UserPromptSubmit`, `PostToolUse`: the newest posts of others not had yet (at most `NEW_POSTS`, no
 *   heartbeats, how many more) and the waits of the connection that resolved unreported — delivered, so never
 *   again. With nothing new (the usual case after a tool call): two primary-key reads, no transaction.
 * - `Stop`, `SubagentStop`: a block while a post addressed to the connection is unread or one of its waits
 *   resolved unreported, the reason carrying (so delivering) them; untargeted posts never block. A loop that
 *   is already continuing because of a block (`stop_hook_active`) is blocked at most
 *   `SOPHIA_HOOK_MAX_CONTINUES` times in a row (`hooks/Streaks.ts`); past that the agent may stop, and
 *   nothing is delivered.
 * - any other event: `{}`.
 */

const NEW_POSTS = 10
const TO_ME_POSTS = 10

const decodeInput = Schema.decodeUnknown(ClaudeCodeHookInput)
const nothing: HookOutput = {}

const context = (hookEventName: HookEvent, additionalContext: string): HookOutput =>
  additionalContext === "" ? nothing : { hookSpecificOutput: { hookEventName, additionalContext } }

export class Hooks extends Effect.Service<Hooks>()("sophia/Hooks", {
  effect: Effect.gen(function*() {
    const coordination = yield* Coordination
    const waits = yield* Waits
    const brief = yield* makeBrief
    const streaks = yield* makeStreaks
    const maxContinues = yield* Effect.orDie(hookMaxContinuesConfig)

    /** The connection's resolved waits not yet reported, claimed (each goes to one response or hook). */
    const resolvedWaits = (caller: Caller) =>
      Effect.flatMap(waits.flags(caller), (flags) =>
        flags.undelivered
          ? Effect.map(waits.signalsAfter(caller, { open: false, undelivered: true }), (s) => s.resolved)
          : Effect.succeed([]))

    const news = (caller: Caller, event: HookEvent) =>
      Effect.gen(function*() {
        const delivered = yield* coordination.deliverNew(caller, NEW_POSTS, "hook")
        const resolved = yield* resolvedWaits(caller)
        return context(event, deliveryText(delivered.posts, delivered.more, resolved))
      })

    const stop = (caller: Caller, input: ClaudeCodeHookInput) =>
      Effect.gen(function*() {
        const loop = input.hook_event_name === "SubagentStop" ? `${input.session_id ?? ""}/${input.agent_id ?? ""}` : input.session_id ?? ""
        const continuing = input.stop_hook_active === true
        const streak = continuing ? yield* streaks.get(caller, loop) : 0
        if (!continuing) yield* streaks.clear(caller, loop)
        // past the bound the agent may stop; what would have blocked stays unread for its next turn
        if (streak >= maxContinues && continuing) return nothing
        const toMe = yield* coordination.deliverToMe(caller, TO_ME_POSTS, "hook")
        const resolved = yield* resolvedWaits(caller)
        if (toMe.posts.length === 0 && resolved.length === 0) return nothing
        if (continuing) yield* streaks.bump(caller, loop, streak)
        return { decision: "block" as const, reason: stopReason(toMe.posts, toMe.more, resolved) } satisfies HookOutput
      })

    /**
     * Answer one Claude Code hook for the connection: `input` is the hook's JSON as the runtime sent it. Not an
     * object naming its `hook_event_name`: `ValidationError`.
     */
    const claudeCode = spanned("Hooks.claudeCode", (caller: Caller, input: unknown): Effect.Effect<HookOutput, ValidationError> =>
      Effect.gen(function*() {
        const hook = yield* decodeInput(input).pipe(
          Effect.mapError(() => new ValidationError({ detail: "the body is not a Claude Code hook input: a JSON object with hook_event_name" }))
        )
        switch (hook.hook_event_name) {
          case "SessionStart":
            return context("SessionStart", yield* brief(caller))
          case "UserPromptSubmit":
          case "PostToolUse":
            return yield* news(caller, hook.hook_event_name)
          case "Stop":
          case "SubagentStop":
            return yield* stop(caller, hook)
          default:
            return nothing
        }
      }))

    return { claudeCode, maxContinues } as const
  })
}) {}
