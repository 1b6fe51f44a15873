/**
 * `sophia hook claude-code`: Claude Code's command hook. The hook input on stdin goes as it is to the
 * daemon's `POST /hooks/claude-code` with the agent's bearer; the daemon's reply (the hook output Claude
 * Code reads) goes to stdout, exit 0. Everything a hook decides is the daemon's: this is a pipe, and it
 * loads nothing but `fetch` (it runs after every tool call). A failure is one `sophia: …` line on stderr,
 * exit 1 — a non-blocking error for Claude Code.
 */
import { bearerFromEnv, daemonUrl, post } from "./Daemon.js"

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
