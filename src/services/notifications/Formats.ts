import { createHmac } from "node:crypto"
import type { NotificationBody, NotifyFormat } from "../../domain/Notifications.js"

/**
 * How a notification is written for its target (pure: no I/O). `json` is the contract's body; `slack` is an
 * incoming webhook's `{ text }` (mrkdwn, links as `<url|label>`); `ntfy` is a plain-text message with ntfy's
 * `Title`, `Tags`, `Priority` and `Click` headers (and a `view` action to approve). Every format carries the
 * `Sophia-Event` and `Sophia-Delivery` headers, and with a secret `Sophia-Signature` over the exact bytes sent.
 */

export interface Rendered {
  readonly body: string
  readonly headers: Readonly<Record<string, string>>
}

/** The title a person reads first (ASCII: it travels in an HTTP header for ntfy). */
const TITLES: Record<string, string> = {
  approval_requested: "Approval requested",
  approval_decided: "Approval decided",
  wait_ended: "Wait ended",
  orphan: "Work orphaned",
  connection_revoked: "Connection revoked",
  test: "Test notification"
}
export const titleOf = (event: string) => `Sophia: ${TITLES[event] ?? event}`

/** Header values must be Latin-1 without controls: anything else becomes `?`. */
const headerSafe = (text: string) => text.replace(/[^\x20-\x7e]/g, "?").slice(0, 250)

const slackText = (body: NotificationBody) => {
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
  const links = Object.entries(body.links).map(([name, url]) =>
    `<${url}|${name === "approve" ? "Open to approve or deny" : name === "portal" ? "Open in the portal" : esc(name)}>`
  )
  return `*${esc(titleOf(body.event))}*\n${esc(body.summary)}${links.length > 0 ? `\n${links.join(" · ")}` : ""}`
}

const ntfyText = (body: NotificationBody) => {
  const lines = [body.summary]
  for (const [name, url] of Object.entries(body.links)) lines.push(`${name}: ${url}`)
  return lines.join("\n")
}

/** The body and the format's own headers. */
export const render = (format: NotifyFormat, body: NotificationBody): Rendered => {
  switch (format) {
    case "json":
      return { body: JSON.stringify(body), headers: { "content-type": "application/json" } }
    case "slack":
      return { body: JSON.stringify({ text: slackText(body) }), headers: { "content-type": "application/json" } }
    case "ntfy": {
      const click = body.links.approve ?? body.links.portal
      return {
        body: ntfyText(body),
        headers: {
          "content-type": "text/plain; charset=utf-8",
          title: headerSafe(titleOf(body.event)),
          tags: body.event === "approval_requested" ? "raised_hand" : body.event === "test" ? "bell" : "warning",
          priority: body.event === "approval_requested" || body.event === "orphan" ? "high" : "default",
          ...(click ? { click } : {}),
          ...(body.links.approve ? { actions: `view, Approve or deny, ${body.links.approve}` } : {})
        }
      }
    }
  }
}

/** `Sophia-Signature`: `t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<body>">` under the target's secret. */
export const signature = (secret: string, unixS: number, body: string) =>
  `t=${unixS},v1=${createHmac("sha256", secret).update(`${unixS}.${body}`).digest("hex")}`

/** Every header of one send: the format's, the event, the delivery id (the same on each retry), the signature. */
export const headersOf = (
  rendered: Rendered,
  body: NotificationBody,
  secret: string | null,
  unixS: number
): Record<string, string> => ({
  ...rendered.headers,
  "user-agent": "sophia-notify",
  "sophia-event": body.event,
  "sophia-delivery": body.id,
  ...(secret !== null ? { "sophia-signature": signature(secret, unixS, rendered.body) } : {})
})
