/**
 * The hooks of agent runtimes, as commands.
 *
 * `sophia hook claude-code`: Claude Code's command hook. The hook input on stdin goes as it is to the
 * daemon's `POST /hooks/claude-code` with the agent's bearer; the daemon's reply (the hook output Claude
 * Code reads) goes to stdout, exit 0. Everything a hook decides is the daemon's: this is a pipe, and it
 * loads nothing but `fetch` (it runs after every tool call). A failure is one `sophia: …` line on stderr,
 * exit 1 — a non-blocking error for Claude Code.
 *
 * `sophia hook codex <notification>`: the Codex CLI's `notify` program (`sophia setup codex` installs it).
 * Codex runs it, fire and forget, when the agent finishes a turn, with the notification as the last
 * argument (`{"type":"agent-turn-complete","thread-id",…,"cwd",…}`), and lets it say nothing back to the
 * agent. So at the moment the agent stops, it tells the person at the terminal what is addressed to the
 * agent and unread — read with `peek`, so the agent still gets those posts itself, marked read when it reads
 * them: a desktop notification through the terminal (OSC 9, which Codex's own notices use; nothing is drawn
 * over Codex's screen), or, with no terminal, one line on stdout. Nothing unread, or another notification
 * type: nothing.
 */
import * as fs from "node:fs"
import { bearerFromEnv, callTool, daemonUrl, post } from "./Daemon.js"
import { postLine } from "./Watch.js"

const readStdin = async (): Promise<string> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString("utf8")
}

export const hookClaudeCode = async (o: { readonly url: string | undefined }): Promise<void> => {
  const bearer = bearerFromEnv()
  const input = await readStdin()
  const reply = await post(daemonUrl(o.url), "/hooks/claude-code", bearer, input, 30_000)
  process.stdout.write(reply.endsWith("\n") ? reply : `${reply}\n`)
}

/** What Codex passes to its notify program (the fields Sophia reads). */
interface CodexNotification {
  readonly type?: unknown
}

/** A notice to the person at the terminal: OSC 9 on the controlling terminal, else a line on stdout. */
const tellTerminal = (text: string) => {
  try {
    const tty = fs.openSync("/dev/tty", "w")
    try {
      fs.writeSync(tty, `\x1b]9;${text.replace(/[\x00-\x1f\x7f]/g, " ")}\x07`)
    } finally {
      fs.closeSync(tty)
    }
  } catch {
    process.stdout.write(`${text}\n`)
  }
}

export const hookCodex = async (o: { readonly url: string | undefined; readonly notification: string | undefined }): Promise<void> => {
  if (o.notification === undefined) {
    throw new Error("hook codex: Codex's notify passes the notification (JSON) as the last argument; none was given")
  }
  let notification: CodexNotification
  try {
    notification = JSON.parse(o.notification) as CodexNotification
  } catch {
    throw new Error("hook codex: the notification is not JSON")
  }
  if (notification?.type !== "agent-turn-complete") return
  const bearer = bearerFromEnv()
  const page = await callTool(daemonUrl(o.url), bearer, "sophia.coordination_inbox", { to_me: true, peek: true, limit: 3 })
  const posts: Array<Parameters<typeof postLine>[0]> = page.posts ?? []
  if (posts.length === 0) return
  const count = posts.length < 3 ? `${posts.length}` : "3 or more"
  tellTerminal(`Sophia: ${count} post${posts.length === 1 ? "" : "s"} addressed to this agent unread; first: ${postLine(posts[0]!)}`)
}
