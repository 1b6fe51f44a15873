/**
 * `sophia watch`: blocks until a post this connection would see as unread lands, prints it (a line per
 * post; `--json`: one object per line), and goes on — or exits after the first batch with `--once`. For
 * shell loops and terminal multiplexers. It reads through the inbox's long poll (`wait_s`), so what it
 * prints is marked read for this connection. Plain `fetch` (cli/Daemon.ts), no library.
 */
import { bearerFromEnv, callTool, daemonUrl } from "./Daemon.js"

export interface WatchOptions {
  readonly url: string | undefined
  readonly channel: string | undefined
  readonly kinds: string | undefined
  readonly once: boolean
  readonly json: boolean
}

interface Post {
  readonly channel: string
  readonly channel_seq: number
  readonly kind: string
  readonly agent_name: string
  readonly body: string
  readonly to_agent_name: string | null
}

/** One post as a line: `[channel #seq] agent (kind → to): body`, newlines shown as ⏎. */
export const postLine = (p: Post): string =>
  `[${p.channel} #${p.channel_seq}] ${p.agent_name} (${p.kind}${p.to_agent_name ? ` → ${p.to_agent_name}` : ""}): ${
    p.body.replace(/\s*\n\s*/g, " ⏎ ")
  }`

export const watch = async (o: WatchOptions): Promise<void> => {
  const bearer = bearerFromEnv()
  const base = daemonUrl(o.url)
  const kinds = o.kinds?.split(",").map((k) => k.trim()).filter((k) => k.length > 0)
  const filter = kinds === undefined || kinds.length === 0 ? {} : { kinds }
  // a channel is read as a conversation from now on (its cursor); the inbox is read as what is unread
  let cursor: string | null = null
  if (o.channel !== undefined) {
    cursor = (await callTool(base, bearer, "sophia.coordination_inbox", { channel: o.channel, limit: 1, peek: true })).cursor
  }
  for (;;) {
    const args = o.channel === undefined
      ? { ...filter, wait_s: 60 }
      : { ...filter, channel: o.channel, wait_s: 60, ...(cursor === null ? {} : { cursor }) }
    const page = await callTool(base, bearer, "sophia.coordination_inbox", args)
    if (o.channel !== undefined && typeof page.cursor === "string") cursor = page.cursor
    const posts: Array<Post> = (page.posts ?? []).filter((p: Post & { mine?: boolean }) => p.mine !== true)
    for (const p of posts) process.stdout.write(`${o.json ? JSON.stringify(p) : postLine(p)}\n`)
    if (o.once && posts.length > 0) return
  }
}
