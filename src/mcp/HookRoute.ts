import { Effect, Either } from "effect"
import type * as http from "node:http"
import type { Caller } from "../domain/Auth.js"
import type { Hooks } from "../services/Hooks.js"
import { authFailureOf, bodyRefusal, readJson, sendJson, WWW_AUTHENTICATE } from "./HttpBasics.js"

/**
 * `POST /hooks/claude-code`: a Claude Code hook, its input as the body (an HTTP hook, or the CLI's command
 * hook carrying stdin), the hook output Claude Code reads as the reply (200; `{}` when there is nothing to
 * say). The bearer is checked as on every route (401, the usual refusal body); a body that is not JSON, or not
 * a hook input, is 400. What the hook says is decided by the Hooks service, whole.
 */
export const makeHookRoute = (options: {
  readonly hooks: Hooks
  readonly runPromise: <A>(effect: Effect.Effect<A>) => Promise<A>
  readonly authenticate: (req: http.IncomingMessage) => Promise<Caller | undefined>
  readonly limit: number
}) => {
  const claudeCode = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const caller = await options.authenticate(req)
    if (!caller) return sendJson(res, 401, { error: authFailureOf(req) }, WWW_AUTHENTICATE)
    let input: unknown
    try {
      input = await readJson(req, options.limit)
    } catch (e) {
      const r = bodyRefusal(e, options.limit)
      return sendJson(res, r.status, { error: { code: r.code, message: r.message, ...r.details } })
    }
    const answer = await options.runPromise(Effect.either(options.hooks.claudeCode(caller, input)))
    if (Either.isLeft(answer)) return sendJson(res, 400, { error: { code: "validation_error", message: answer.left.message } })
    return sendJson(res, 200, answer.right)
  }
  return { claudeCode } as const
}
