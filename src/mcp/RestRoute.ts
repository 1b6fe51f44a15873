import type { Effect } from "effect"
import type * as http from "node:http"
import type { Caller } from "../domain/Auth.js"
import type { Dispatcher } from "./Dispatch.js"
import { abandonedBy, authFailureOf, bodyRefusal, readJson, sendJson, WWW_AUTHENTICATE } from "./HttpBasics.js"
import { httpStatusOf } from "./Refusals.js"

/** The REST path `POST /api/tools/<tool name>`: the JSON body is the arguments, the reply the tool's result. */
export const makeRestRoute = (options: {
  readonly dispatcher: Dispatcher
  readonly runPromise: <A>(effect: Effect.Effect<A>, options?: { readonly signal?: AbortSignal }) => Promise<A>
  readonly authenticate: (req: http.IncomingMessage) => Promise<Caller | undefined>
  readonly limit: number
}) => {
  const handle = async (req: http.IncomingMessage, res: http.ServerResponse, toolName: string) => {
    const caller = await options.authenticate(req)
    if (!caller) return sendJson(res, 401, { error: authFailureOf(req) }, WWW_AUTHENTICATE)
    let args: unknown
    try {
      args = await readJson(req, options.limit)
    } catch (e) {
      const r = bodyRefusal(e, options.limit)
      return sendJson(res, r.status, { error: { code: r.code, message: r.message, ...r.details } })
    }
    let name: string
    try {
      name = decodeURIComponent(toolName)
    } catch {
      return sendJson(res, 400, { error: { code: "validation_error", message: "the tool name in the path is not valid URI encoding" } })
    }
    // a client that goes away ends its call (a long poll does not keep waiting for nobody)
    const gone = abandonedBy(res)
    const outcome = await options.runPromise(options.dispatcher.call(caller, name, args ?? {}), { signal: gone }).catch((e) => {
      if (gone.aborted) return undefined
      throw e
    })
    if (outcome === undefined) return
    if (outcome.ok) return sendJson(res, 200, outcome.body)
    // revoked while the call ran (a long poll ends so): the 401 the door gives a revoked bearer
    if (outcome.refusal?._tag === "Unauthenticated") {
      return sendJson(res, 401, { ...outcome.body, error: authFailureOf(req) }, WWW_AUTHENTICATE)
    }
    return sendJson(res, outcome.refusal ? httpStatusOf(outcome.refusal) : 500, outcome.body)
  }
  /** `GET /api/tools`: the tools this bearer may call, by group (the brief capability catalog). */
  const list = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const caller = await options.authenticate(req)
    if (!caller) return sendJson(res, 401, { error: authFailureOf(req) }, WWW_AUTHENTICATE)
    const outcome = await options.runPromise(options.dispatcher.call(caller, "sophia.capability_catalog", { brief: true }))
    return sendJson(res, outcome.ok ? 200 : outcome.refusal ? httpStatusOf(outcome.refusal) : 500, outcome.body)
  }
  return { handle, list } as const
}
