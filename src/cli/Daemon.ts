/**
 * Talking to a running daemon over HTTP, as an agent's runtime does (`sophia hook`, `sophia watch`): the
 * daemon from `--url`, else env `SOPHIA_URL`, else the default address; the bearer from `SOPHIA_BEARER`.
 * Plain `fetch`, no Effect and no library: these commands run after every tool call of an agent.
 */

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

/** POST `body` (a JSON text) to `path` with the bearer; the reply's text, or a failure naming the daemon. */
export const post = async (base: string, path: string, bearer: string, body: string, timeoutMs = 90_000): Promise<string> => {
  let res: Response
  try {
    res = await fetch(`${base}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
      body,
      signal: AbortSignal.timeout(timeoutMs)
    })
  } catch (e) {
    const why = e instanceof Error && e.cause instanceof Error ? e.cause.message : e instanceof Error ? e.message : String(e)
    throw new Error(`no daemon answers at ${base} (${why}); start \`sophia serve\` or pass --url / SOPHIA_URL`)
  }
  const text = await res.text()
  if (!res.ok) throw new Error(`${base}${path}: ${said(res.status, text)}`)
  return text
}

/** A tool over the REST path: its JSON reply. */
export const callTool = async (base: string, bearer: string, tool: string, args: unknown): Promise<any> =>
  JSON.parse(await post(base, `/api/tools/${tool}`, bearer, JSON.stringify(args)))
