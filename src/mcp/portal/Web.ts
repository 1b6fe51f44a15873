import * as fs from "node:fs"
import type * as http from "node:http"
import { PORTAL_COOKIE } from "../../domain/Portal.js"
import type { Html } from "./Html.js"

/**
 * The portal's HTTP plumbing: headers every response carries, cookies, forms, responses, and the assets.
 * Node's `http` only: nothing here reads or decides anything of the graph.
 */

export const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY"
}

const MAX_FORM_BYTES = 64 * 1024

export const cookieOf = (req: http.IncomingMessage, name: string): string | undefined => {
  const header = req.headers.cookie
  if (!header) return undefined
  for (const part of header.split(";")) {
    const i = part.indexOf("=")
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim()
  }
  return undefined
}

/** The session cookie a request carries, if any. */
export const sessionCookieOf = (req: http.IncomingMessage) => cookieOf(req, PORTAL_COOKIE)

/** `Set-Cookie` for a session opened by a login (the cookie is the session token; HttpOnly, SameSite=Strict). */
export const setSessionCookie = (token: string, maxAgeS: number) =>
  `${PORTAL_COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/portal; Max-Age=${maxAgeS}`

/** `Set-Cookie` that drops the session cookie (logout). */
export const clearSessionCookie = `${PORTAL_COOKIE}=; HttpOnly; SameSite=Strict; Path=/portal; Max-Age=0`

/** A percent-decoded text (a path segment), or undefined when its encoding is malformed. */
export const percentDecoded = (text: string): string | undefined => {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}

/** Whether a path, query or form body is well-formed percent-encoding (a browser never sends anything else). */
export const wellEncoded = (text: string) => !text.includes("%") || percentDecoded(text) !== undefined

/**
 * A url-encoded form body; `too_large` past `MAX_FORM_BYTES`; `malformed` when it is not well-formed
 * percent-encoding (`URLSearchParams` would read such a body silently, as replacement characters).
 */
export const readForm = (req: http.IncomingMessage): Promise<URLSearchParams | "too_large" | "malformed"> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    let size = 0
    let over = false
    req.on("data", (c: Buffer) => {
      size += c.length
      if (size > MAX_FORM_BYTES) over = true
      else chunks.push(c)
    })
    req.on("end", () => {
      if (over) return resolve("too_large")
      const body = Buffer.concat(chunks).toString("utf8")
      resolve(wellEncoded(body) ? new URLSearchParams(body) : "malformed")
    })
    req.on("error", reject)
  })

export const send = (res: http.ServerResponse, status: number, body: string | Html, headers: Record<string, string> = {}) => {
  if (res.headersSent) return
  const text = typeof body === "string" ? body : body.text
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    ...SECURITY_HEADERS,
    ...headers
  })
  res.end(text)
}

export const redirect = (res: http.ServerResponse, location: string, headers: Record<string, string> = {}) => {
  res.writeHead(303, { location, "cache-control": "no-store", ...SECURITY_HEADERS, ...headers })
  res.end()
}

/** A page path with a notice or an error for the next render (Post/Redirect/Get). */
export const back = (path: string, kind: "notice" | "error", message: string) =>
  `${path}${path.includes("?") ? "&" : "?"}${kind}=${encodeURIComponent(message.slice(0, 300))}`

const ASSETS: Record<string, string> = {
  "portal.css": "text/css; charset=utf-8",
  "portal.js": "text/javascript; charset=utf-8"
}
/**
 * The assets folder: beside this module (src/ under tsx, dist/mcp/portal/ in the library build), or — from a
 * chunk of the bundled CLI in dist/cli/ — the library build's copy (scripts/build.mjs copies it there).
 */
const assetsDir = () => {
  const candidates = [new URL("./assets/", import.meta.url), new URL("../mcp/portal/assets/", import.meta.url)]
  return candidates.find((dir) => fs.existsSync(new URL("portal.css", dir))) ?? candidates[0]!
}

/** The assets, read once: `serve(name, res)` answers one, or says it has none of that name. */
export const loadAssets = () => {
  const dir = assetsDir()
  const assets = new Map(Object.entries(ASSETS).map(([name, type]) => [name, { type, body: fs.readFileSync(new URL(name, dir)) }]))
  return {
    serve: (name: string, res: http.ServerResponse): boolean => {
      const a = assets.get(name)
      if (!a) return false
      res.writeHead(200, { "content-type": a.type, "content-length": a.body.length, "cache-control": "no-cache", ...SECURITY_HEADERS })
      res.end(a.body)
      return true
    }
  }
}
