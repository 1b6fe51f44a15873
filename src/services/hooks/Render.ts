import { connectionShort } from "../../domain/Auth.js"
import type { PostRow } from "../../domain/Coordination.js"
import type { WaitResolvedItem } from "../../domain/Envelope.js"

/**
 * The words a hook puts into the agent's context: compact lines, a post named by its channel and seq (how
 * agents refer to posts), its body cut to a bound (the agent reads the rest with the inbox tool), whitespace
 * folded; a wait by its id (as `declare_wait` returned it). Pure.
 */

/** Fold whitespace and cut `text` to `max` characters (at a word when one is near), marking the cut. */
export const cut = (text: string, max: number) => {
  const flat = text.replace(/\s+/g, " ").trim()
  if (flat.length <= max) return flat
  const head = flat.slice(0, max)
  const space = head.lastIndexOf(" ")
  return `${space > max * 0.6 ? head.slice(0, space) : head}…`
}

/** One post on one line: where, who, what kind, to whom, the body (cut). */
export const postLine = (post: PostRow, bodyMax: number) => {
  const author = post.agent_name !== "" ? post.agent_name : post.connection_short
  const to = post.to_connection_id === null ? "" : ` → ${post.to_agent_name ?? connectionShort(post.to_connection_id)}`
  return `- [${post.channel} #${post.channel_seq}] ${author}${to} (${post.kind}): ${cut(post.body, bodyMax)}`
}

/** One resolved wait on one line. */
export const resolvedLine = (w: WaitResolvedItem) => `- ${w.wait_id} ${w.resolution}: ${cut(w.how, 200)}`

/**
 * What a prompt or a tool call brings: the posts of others not had yet (newest, in order) and how many
 * more stay unread, and the waits that resolved. Empty when there is nothing.
 */
export const deliveryText = (posts: ReadonlyArray<PostRow>, more: number, resolved: ReadonlyArray<WaitResolvedItem>) => {
  const lines: Array<string> = []
  if (posts.length > 0) {
    lines.push(`Sophia: ${posts.length} new post${posts.length === 1 ? "" : "s"} from other agents (now marked read):`)
    for (const p of posts) lines.push(postLine(p, 300))
  }
  if (more > 0) lines.push(`…and ${more} more unread: sophia_coordination_inbox reads them.`)
  if (resolved.length > 0) {
    lines.push(`Sophia: ${resolved.length === 1 ? "a wait of yours" : `${resolved.length} waits of yours`} resolved:`)
    for (const w of resolved) lines.push(resolvedLine(w))
  }
  return lines.join("\n")
}

/**
 * Why the agent may not stop yet: the posts addressed to it (now delivered) and its waits that resolved,
 * and what to do about them.
 */
export const stopReason = (posts: ReadonlyArray<PostRow>, more: number, resolved: ReadonlyArray<WaitResolvedItem>) => {
  const lines: Array<string> = ["Before you stop, Sophia has news for you (now marked read):"]
  if (posts.length > 0) {
    lines.push(`${posts.length === 1 ? "A post" : `${posts.length} posts`} addressed to you:`)
    for (const p of posts) lines.push(postLine(p, 600))
    if (more > 0) lines.push(`…and ${more} more addressed to you: sophia_coordination_inbox with to_me reads them.`)
  }
  if (resolved.length > 0) {
    lines.push(`${resolved.length === 1 ? "A wait" : `${resolved.length} waits`} of yours resolved:`)
    for (const w of resolved) lines.push(resolvedLine(w))
  }
  lines.push("Act on them (answer with sophia_coordination_post, to: the author) if they need it; then you may stop.")
  return lines.join("\n")
}
