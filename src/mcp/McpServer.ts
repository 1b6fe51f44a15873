import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js"
import {
  CallToolRequestSchema,
  ElicitResultSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import type { ElicitAnswer } from "../domain/Approvals.js"
import type { Caller } from "../domain/Auth.js"
import type { CallOutcome, Dispatcher } from "./Dispatch.js"
import { AUTH_MESSAGE } from "./Refusals.js"
import type { ToolNaming } from "./Registry.js"
import { VERSION } from "../Version.js"

export const SERVER_INFO = { name: "sophia", version: VERSION } as const

export const INSTRUCTIONS = "Sophia is the shared state layer of your agent fleet. Start with sophia.orient (you) and " +
  "sophia.panorama (the fleet); every result carries _inbox_unread (your unread posts); wait for posts with " +
  "coordination_inbox wait_s, for an " +
  "approval with approval_status wait_s, then repeat the call with its approval_id. List tools take compact " +
  "(~5 keys a row, text cut) and fields (only these row keys). Use sophia.execute_code for 3+ reads or a " +
  "read-modify-write."

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>

export interface McpServerOptions {
  readonly dispatcher: Dispatcher
  readonly naming: ToolNaming
  /** who is calling: checked against the connection row on every request; undefined = not authenticated */
  readonly resolveCaller: (extra: Extra) => Promise<Caller | undefined>
  readonly runPromise: <A>(effect: Effect.Effect<A>, options?: { readonly signal?: AbortSignal }) => Promise<A>
  /** told +1 when a tool call starts and -1 when its answer is ready (stdio waits for them before it ends) */
  readonly calls?: ((delta: 1 | -1) => void) | undefined
}

/** A result as MCP wants it: structured content plus one text block with the same JSON. */
export const toCallToolResult = (outcome: CallOutcome): CallToolResult =>
  outcome.ok
    ? { content: [{ type: "text", text: JSON.stringify(outcome.body) }], structuredContent: outcome.body }
    // Refusals travel as `isError` text only: SDK clients validate any structuredContent against the
    // tool's (success) outputSchema, so a structured refusal would be rejected client-side.
    : { isError: true, content: [{ type: "text", text: JSON.stringify(outcome.body) }] }

const unauthenticated: CallToolResult = {
  isError: true,
  content: [{
    type: "text",
    text: JSON.stringify({ error: { code: "unauthenticated", message: AUTH_MESSAGE }, _inbox_unread: 0 })
  }]
}

/** The inbox as MCP resources: `sophia://inbox` (the unread inbox) and `sophia://inbox/<channel>` (the conversation). */
export const INBOX_URI = "sophia://inbox"
const INBOX_CHANNEL_PREFIX = `${INBOX_URI}/`

/** The channel a resource URI names (`undefined` for the whole inbox), or `null` for a URI that is not ours. */
export const inboxChannelOf = (uri: string): string | undefined | null => {
  if (uri === INBOX_URI) return undefined
  if (!uri.startsWith(INBOX_CHANNEL_PREFIX) || uri.length === INBOX_CHANNEL_PREFIX.length) return null
  try {
    return decodeURIComponent(uri.slice(INBOX_CHANNEL_PREFIX.length))
  } catch {
    return null
  }
}

/** The transport's signal that the request carrying this call went away (Http.ts sets it per HTTP request). */
const abandonedSignal = (extra: Extra): AbortSignal | undefined => {
  const s = extra.authInfo?.extra?.abandoned
  return s instanceof AbortSignal ? s : undefined
}

/**
 * A signal aborted when either of two is, with its listeners removed once the call is over. Not
 * `AbortSignal.any`: on Node 20 it tracks every combined signal through weak references and a finalization
 * registry on its sources, a cost paid on every tool call.
 */
const eitherSignal = (a: AbortSignal, b: AbortSignal) => {
  const controller = new AbortController()
  const abort = () => controller.abort()
  if (a.aborted || b.aborted) abort()
  else {
    a.addEventListener("abort", abort, { once: true })
    b.addEventListener("abort", abort, { once: true })
  }
  return {
    signal: controller.signal,
    release: () => {
      a.removeEventListener("abort", abort)
      b.removeEventListener("abort", abort)
    }
  }
}

/**
 * The approval question of a plain write, asked through MCP elicitation on the call's own request stream —
 * only when the client declared the capability. A failed or unanswered elicitation counts as `cancel`.
 */
const elicitFor = (server: Server, extra: Extra) =>
  server.getClientCapabilities()?.elicitation === undefined ? undefined : (message: string) =>
    Effect.promise((): Promise<ElicitAnswer> =>
      extra.sendRequest({
        method: "elicitation/create",
        params: {
          message,
          requestedSchema: {
            type: "object",
            properties: { approve: { type: "boolean", title: "Approve", description: "allow this one call" } }
          }
        }
      }, ElicitResultSchema).then(
        (r) => r.action === "accept" ? (r.content?.approve === false ? "decline" : "accept") : r.action,
        () => "cancel"
      )
    )

/**
 * The SDK's low-level `Server` over our registry: raw JSON Schemas from the Effect Schemas, every call
 * through the Dispatcher. One per MCP session; nothing that matters lives in it.
 */
export const makeMcpServer = (options: McpServerOptions): Server => {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: true }, resources: { subscribe: true } },
    instructions: INSTRUCTIONS
  })
  server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => {
    const caller = await options.resolveCaller(extra)
    if (!caller) return { tools: [] }
    return { tools: [...options.dispatcher.registry.listFor(caller.profile, options.naming)] }
  })
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    options.calls?.(1)
    try {
      return await callTool(request.params.name, request.params.arguments, extra)
    } finally {
      options.calls?.(-1)
    }
  })
  const callTool = async (name: string, args: Record<string, unknown> | undefined, extra: Extra): Promise<CallToolResult> => {
    const caller = await options.resolveCaller(extra)
    if (!caller) return unauthenticated
    // a call ends (its fiber interrupted, a long poll unparked) when the client cancels it, the session
    // closes, or the HTTP request that carries it goes away
    const gone = abandonedSignal(extra)
    const either = gone === undefined ? undefined : eitherSignal(extra.signal, gone)
    const signal = either?.signal ?? extra.signal
    const outcome = await options.runPromise(
      options.dispatcher.call(caller, name, args, { elicit: elicitFor(server, extra) }),
      { signal }
    ).catch((e) => {
      if (signal.aborted) return undefined
      throw e
    }).finally(() => either?.release())
    return outcome === undefined ? { isError: true, content: [{ type: "text", text: "{\"error\":{\"code\":\"cancelled\"}}" }] } : toCallToolResult(outcome)
  }
  // ---- the inbox as resources ----
  const channelOf = (uri: string) => {
    const channel = inboxChannelOf(uri)
    if (channel === null) throw new McpError(ErrorCode.InvalidParams, `unknown resource ${uri}; try ${INBOX_URI} or ${INBOX_URI}/<channel>`)
    return channel
  }
  const authenticated = async (extra: Extra) => {
    const caller = await options.resolveCaller(extra)
    if (!caller) throw new McpError(-32001, AUTH_MESSAGE)
    return caller
  }
  server.setRequestHandler(ListResourcesRequestSchema, async (_request, extra) => {
    await authenticated(extra)
    return {
      resources: [{
        uri: INBOX_URI,
        name: "inbox",
        mimeType: "application/json",
        description: "your unread posts (as sophia.coordination_inbox, compact, peek); subscribe for updates"
      }]
    }
  })
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async (_request, extra) => {
    await authenticated(extra)
    return {
      resourceTemplates: [{
        uriTemplate: `${INBOX_URI}/{channel}`,
        name: "channel",
        mimeType: "application/json",
        description: "one channel's conversation (as sophia.coordination_inbox with channel, compact, peek)"
      }]
    }
  })
  // reading a resource is the inbox tool's page, compact, without marking anything read (a client may
  // re-read a resource whenever it likes; reading the inbox tool is what consumes unread posts)
  server.setRequestHandler(ReadResourceRequestSchema, async (request, extra) => {
    const caller = await authenticated(extra)
    const channel = channelOf(request.params.uri)
    const outcome = await options.runPromise(options.dispatcher.call(caller, "sophia.coordination_inbox", {
      ...(channel !== undefined ? { channel } : {}),
      compact: true,
      peek: true
    }))
    return { contents: [{ uri: request.params.uri, mimeType: "application/json", text: JSON.stringify(outcome.body) }] }
  })
  // one watcher per subscribed URI, ended by unsubscribe or when the session closes
  const subscriptions = new Map<string, AbortController>()
  server.setRequestHandler(SubscribeRequestSchema, async (request, extra) => {
    const caller = await authenticated(extra)
    const uri = request.params.uri
    const channel = channelOf(uri)
    if (subscriptions.has(uri)) return {}
    const stop = new AbortController()
    subscriptions.set(uri, stop)
    const notify = () => {
      if (server.transport) server.sendResourceUpdated({ uri }).catch(() => undefined)
    }
    options.runPromise(
      Effect.scoped(Effect.zipRight(options.dispatcher.watchInbox(caller, channel, notify), Effect.never)),
      { signal: stop.signal }
    ).catch(() => undefined)
    return {}
  })
  server.setRequestHandler(UnsubscribeRequestSchema, async (request, extra) => {
    await authenticated(extra)
    subscriptions.get(request.params.uri)?.abort()
    subscriptions.delete(request.params.uri)
    return {}
  })

  // forward run-time surface changes as notifications/tools/list_changed while connected
  const unsubscribe = options.dispatcher.registry.changes.subscribe(() => {
    if (server.transport) server.sendToolListChanged().catch(() => undefined)
  })
  server.onclose = () => {
    unsubscribe()
    for (const stop of subscriptions.values()) stop.abort()
    subscriptions.clear()
  }
  return server
}
