/**
 * Talking to a running daemon over HTTP, as an agent's runtime does (`sophia hook`, `sophia watch`): the
 * daemon from `--url`, else env `SOPHIA_URL`, else the default address; the bearer from `SOPHIA_BEARER`.
 * Node's own `http` client, no Effect and no library: these commands run after every tool call of an agent
 * (the global `fetch` would first load its implementation, undici: ~0.3× a bare `node -e 0` more, measured);
 * `node:https` (TLS: ~5 ms of a start) only for an https: URL.
 */
import * as http from "node:http"

/** Where the daemon listens when neither `--url` nor `SOPHIA_URL` says. */
export const DEFAULT_URL = "http://127.0.0.1:7337"

/** The daemon's base URL (no trailing slash). */
export const daemonUrl = (flag: string | undefined): string =>
  (flag ?? process.env.SOPHIA_URL ?? DEFAULT_URL).trim().replace(/\/+$/, "")

/** The agent's bearer, or a failure saying where it comes from. */
export const bearerFromEnv = (): string => {
  const bearer = (process.env.SOPHIA_BEARER ?? "").trim()
  if (bearer === "") throw new Error("set SOPHIA_BEARER to the bearer of this agent's connection")
  return bearer
}

/** What a refusal body says, in one line (`{ error: { code, message } }`), else the status. */
const said = (status: number, text: string): string => {
  try {
    const error = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error
    if (error?.code !== undefined) return `${error.code}: ${error.message ?? ""}`.trim()
  } catch {
    // not JSON: the status says it
  }
  return `HTTP ${status}`
}

/** One HTTP request: the reply's status and text, or a failure (refused, reset, no answer within `timeoutMs`). */
export const request = async (
  url: string,
  options: { readonly method: string; readonly headers?: Record<string, string>; readonly body?: string; readonly timeoutMs: number }
): Promise<{ readonly status: number; readonly text: string }> => {
  const client: Pick<typeof http, "request"> = url.startsWith("https:") ? await import("node:https") : http
  return new Promise((resolve, reject) => {
    const req = client.request(url, { method: options.method, headers: options.headers, timeout: options.timeoutMs }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }))
      res.on("error", reject)
    })
    req.on("timeout", () => req.destroy(new Error(`no answer within ${options.timeoutMs} ms`)))
    req.on("error", reject)
    req.end(options.body)
  })
}

/** POST `body` (a JSON text) to `path` with the bearer; the reply's text, or a failure naming the daemon. */
export const post = async (base: string, path: string, bearer: string, body: string, timeoutMs = 90_000): Promise<string> => {
  let res: { readonly status: number; readonly text: string }
  try {
    res = await request(`${base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body,
      timeoutMs
    })
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e)
    throw new Error(`no daemon answers at ${base} (${why}); start \`sophia serve\` or pass --url / SOPHIA_URL`)
  }
  if (res.status < 200 || res.status > 299) throw new Error(`${base}${path}: ${said(res.status, res.text)}`)
  return res.text
}

/** A tool over the REST path: its JSON reply. */
export const callTool = async (base: string, bearer: string, tool: string, args: unknown): Promise<any> =>
  JSON.parse(await post(base, `/api/tools/${tool}`, bearer, JSON.stringify(args)))
