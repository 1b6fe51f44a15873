import type * as http from "node:http"

/** The plain HTTP pieces the daemon's routes share: bearers, JSON bodies in and out, client departures. */

export const LOOPBACK_NAMES = new Set(["localhost", "127.0.0.1", "[::1]", "::1"])

export const bearerOf = (req: http.IncomingMessage): string | undefined => {
  const header = req.headers.authorization
  if (!header) return undefined
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return match ? match[1] : undefined
}

export const sendJson = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  if (res.headersSent) return
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

export const jsonRpcError = (code: number, message: string, data?: unknown) => ({
  jsonrpc: "2.0",
  error: data === undefined ? { code, message } : { code, message, data },
  id: null
})

export const WWW_AUTHENTICATE = { "www-authenticate": "Bearer realm=\"sophia\"" }

export class BodyTooLarge {
  constructor(readonly actual: number) {}
}
export class MalformedJson {
  constructor(readonly detail: string) {}
}

/** Read and parse a JSON body, refusing above `limit` bytes without buffering the rest. Empty body = undefined. */
export const readJson = (req: http.IncomingMessage, limit: number): Promise<unknown> =>
  new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? "NaN")
    if (Number.isFinite(declared) && declared > limit) {
      req.resume()
      return reject(new BodyTooLarge(declared))
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let failed = false
    req.on("data", (chunk: Buffer) => {
      if (failed) return
      size += chunk.length
      if (size > limit) {
        failed = true
        reject(new BodyTooLarge(size))
        return
      }
      chunks.push(chunk)
    })
    req.on("end", () => {
      if (failed) return
      const text = Buffer.concat(chunks).toString("utf8")
      if (text.trim() === "") return resolve(undefined)
      try {
        resolve(JSON.parse(text))
      } catch (e) {
        reject(new MalformedJson(e instanceof Error ? e.message : String(e)))
      }
    })
    req.on("error", reject)
  })

/** Aborted when the response's connection closes before the response was sent (the client went away). */
export const abandonedBy = (res: http.ServerResponse): AbortSignal => {
  const controller = new AbortController()
  res.once("close", () => {
    if (!res.writableFinished) controller.abort()
  })
  return controller.signal
}

/**
 * The reply to a POST is a short SSE stream (usually one event, then the end). The SDK's Node adapter
 * flushes the headers on their own as soon as the reply is not ready within a tick, which a tool call
 * never is: one more loopback write (and one more wake-up of the client) per call. Here the headers wait
 * for the first event; Node corks a response's first write until the next tick, so headers, event and
 * end leave in one write. The standalone GET stream keeps its early headers (the client waits for them).
 */
export const sendHeadersWithFirstEvent = (res: http.ServerResponse) => {
  res.flushHeaders = () => {}
}

/**
 * How long an idle keep-alive socket stays open: longer than clients keep theirs by default (undici: 4 s),
 * so a client never reuses a socket the server is closing at that instant ("other side closed"). Clients
 * are told (`Keep-Alive: timeout=65`), so an agent that thinks for longer than 4 s between calls keeps its
 * connection instead of opening a new one for the next call (undici keeps it up to the hint less 1 s).
 */
export const KEEP_ALIVE_S = 65
/**
 * Node says `Keep-Alive: timeout=…` itself only when it writes the `Connection` header; the SDK's
 * Streamable HTTP responses set `Connection: keep-alive` themselves, so they would go without the hint.
 */
export const hintKeepAlive = (res: http.ServerResponse) => res.setHeader("keep-alive", `timeout=${KEEP_ALIVE_S}`)

/** A body that could not be read, as the refusal both routes give (each in its own wire shape). */
export const bodyRefusal = (e: unknown, limit: number) => {
  if (e instanceof BodyTooLarge) {
    return {
      status: 413,
      code: "payload_too_large",
      message: `request body is ${e.actual} bytes; the limit is ${limit} bytes`,
      details: {
        limit,
        actual: e.actual,
        unit: "bytes",
        hint: "split the call: several smaller calls (an import as several sophia.begin_import_session calls, each under the limit), or compose them in one sophia.execute_code"
      }
    }
  }
  if (e instanceof MalformedJson) {
    return { status: 400, code: "validation_error", message: `malformed JSON: ${e.detail}`, details: {} }
  }
  throw e
}

/**
 * Host and Origin checked against loopback names and the bound host (DNS-rebinding protection); `port` is
 * read at each request (the bound port is known only once listening: 0 picks one).
 */
export const hostGuard = (host: string, port: () => number) => {
  const allowedNames = new Set([...LOOPBACK_NAMES, host.toLowerCase()])
  const hostAllowed = (req: http.IncomingMessage) => {
    const header = req.headers.host
    if (!header) return false
    const url = URL.canParse(`http://${header}`) ? new URL(`http://${header}`) : undefined
    if (!url || !allowedNames.has(url.hostname.toLowerCase())) return false
    return url.port === "" || Number(url.port) === port()
  }
  const originAllowed = (req: http.IncomingMessage) => {
    const origin = req.headers.origin
    if (!origin) return true
    if (!URL.canParse(origin)) return false
    const url = new URL(origin)
    // a browser page on another local port is another origin too
    const originPort = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
    return allowedNames.has(url.hostname.toLowerCase()) && originPort === port()
  }
  return { hostAllowed, originAllowed } as const
}

/** Why a request was not authenticated: told apart, so a client knows what to fix. */
export type AuthFailureReason = "missing" | "malformed" | "unknown_or_revoked"

const MINT_HINT = "the owner mints a connection with `sophia connection create --name <name> --profile observer|assistant|full`"

/**
 * The refusal of an unauthenticated request, as every refusal is shaped (`code`, `message`, `hint`), with the
 * reason: no `Authorization` header, one that is not `Bearer sph_…`, or a bearer that is unknown or revoked.
 */
export const authFailureOf = (req: http.IncomingMessage) => {
  const header = req.headers.authorization
  const bearer = bearerOf(req)
  const reason: AuthFailureReason = header === undefined || header.trim() === ""
    ? "missing"
    : bearer === undefined || !bearer.startsWith("sph_")
    ? "malformed"
    : "unknown_or_revoked"
  const said = {
    missing: {
      message: "no Authorization header: every request carries its connection's bearer",
      hint: `send \`Authorization: Bearer sph_…\` with your connection's bearer; ${MINT_HINT}`
    },
    malformed: {
      message: "the Authorization header is not `Bearer sph_…`",
      hint: "send `Authorization: Bearer ` followed by the bearer exactly as it was printed (it starts with sph_)"
    },
    unknown_or_revoked: {
      message: "the bearer is unknown, or its connection was revoked",
      hint: `a revoked bearer never works again: ask the owner for a new connection; ${MINT_HINT}`
    }
  }[reason]
  return { code: "unauthenticated", reason, ...said } as const
}
