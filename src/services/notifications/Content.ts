import type { NotificationContent, SentEvent } from "../../domain/Notifications.js"

/**
 * What a notification says, from what its row holds (the event's ids and, for `orphan`, what the connection held
 * when it went) and the agents' names as they are now (pure: the caller looks the names up). Rendered when the
 * notification is sent or listed, never on the write path: an event writes one small row.
 */

/** What an outbox row holds: the event's own facts. */
export type StoredData = Readonly<Record<string, unknown>>

/** The connection ids a row's content names (looked up in one statement before rendering). */
export const namedIn = (data: StoredData): ReadonlyArray<string> =>
  ["connection_id", "waiter"].flatMap((k) => (typeof data[k] === "string" ? [data[k] as string] : []))

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`
const str = (v: unknown) => (typeof v === "string" ? v : "")
const approvalPath = (id: string) => `/portal/approvals?approval=${encodeURIComponent(id)}`

/**
 * The summary, data and portal paths of a notification. `approveLink`: the path of the approve link minted for
 * this send (`approval_requested` only).
 */
export const describe = (
  event: SentEvent,
  data: StoredData,
  names: ReadonlyMap<string, string>,
  approveLink?: string
): NotificationContent => {
  const nameOf = (key: string) => {
    const id = str(data[key])
    return names.get(id) ?? id.slice(0, 8)
  }
  switch (event) {
    case "approval_requested": {
      const agent = nameOf("connection_id")
      return {
        summary: `${agent} asks to run ${str(data.tool)} (${str(data.access)}); approval ${str(data.approval_id)} waits for you`,
        data: { ...data, agent_name: agent },
        links: { ...(approveLink !== undefined ? { approve: approveLink } : {}), portal: approvalPath(str(data.approval_id)) }
      }
    }
    case "approval_decided": {
      const agent = nameOf("connection_id")
      return {
        summary: `approval ${str(data.approval_id)} for ${agent} was ${str(data.status)} (${str(data.via)})`,
        data: { ...data, agent_name: agent },
        links: { portal: approvalPath(str(data.approval_id)) }
      }
    }
    case "wait_ended": {
      const waiter = nameOf("waiter")
      return {
        summary: `${waiter}'s wait on ${str(data.channel)} ended ${str(data.resolution)}`,
        data: { ...data, waiter_name: waiter },
        links: { portal: "/portal/waits" }
      }
    }
    case "connection_revoked": {
      const agent = nameOf("connection_id")
      return { summary: `${agent} was revoked: its bearer opens nothing any more`, data: { ...data, agent_name: agent }, links: { portal: "/portal" } }
    }
    case "orphan": {
      const agent = nameOf("connection_id")
      const work = Array.isArray(data.work) ? data.work.length : 0
      const leases = Array.isArray(data.leases) ? data.leases.length : 0
      const holding = [work > 0 ? plural(work, "claimed work item") : "", leases > 0 ? plural(leases, "lease") : ""].filter((s) => s !== "")
        .join(" and ")
      return {
        summary: `${agent} is ${str(data.reason)} holding ${holding}; another agent may take them over`,
        data: { ...data, agent_name: agent },
        links: { portal: "/portal" }
      }
    }
    case "test":
      return { summary: "Test notification from Sophia: this target is reachable", data, links: { portal: "/portal/notifications" } }
  }
}
