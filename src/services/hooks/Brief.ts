import { Effect } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { BlockingItem } from "../../domain/Envelope.js"
import type { LeaseRow } from "../../domain/Leases.js"
import type { WorkSummary } from "../../domain/Ledger.js"
import type { OrphanedWork } from "../../domain/Orphans.js"
import { Approvals } from "../Approvals.js"
import { Coordination } from "../Coordination.js"
import { Leases } from "../Leases.js"
import { Ledger } from "../Ledger.js"
import { Waits } from "../Waits.js"
import { cut } from "./Render.js"

/**
 * The brief a session starts with: who the agent is, its unread (and how many are addressed to it), its open
 * waits, the work it has claimed and the leases it holds, the orphans (work and waits nobody will answer), its
 * pending approvals —
 * each asked of the service that owns it. Nothing is marked read or delivered: the brief only tells. It
 * stays small (about 400 tokens at most): at most `SHOWN` items of a list, each title cut, the rest counted,
 * no ids but the approvals' (`approval_status` needs one), and the whole bounded by `MAX_CHARS`.
 */

const SHOWN = 3
const MAX_CHARS = 1200


/** A list's line: its heading, at most `SHOWN` items, and how many more. */
const listed = <A>(heading: string, items: ReadonlyArray<A>, line: (a: A) => string) =>
  items.length === 0 ? [] : [
    `${heading} (${items.length}): ${items.slice(0, SHOWN).map(line).join("; ")}${
      items.length > SHOWN ? `; and ${items.length - SHOWN} more` : ""
    }.`
  ]

const waitLine = (w: BlockingItem) => {
  const p = w.predicate
  const what = [p.type, typeof p.channel === "string" ? `in ${cut(p.channel, 30)}` : undefined].filter((s) => s !== undefined).join(" ")
  // (a wait lasts an hour at most: the time of day says when)
  return `on ${w.on.agent_name !== "" ? cut(w.on.agent_name, 30) : w.on.connection_short} (${what}) until ${w.expires_at.slice(11, 16)}Z`
}
const workLine = (w: WorkSummary) => `${cut(w.work_id, 30)} "${cut(w.title, 40)}" (${w.status})`
// (a lease may last a day: the date too)
const leaseLine = (l: LeaseRow) =>
  `${cut(l.resources.join(" "), 50)} (${l.mode}${l.project !== "default" ? `, ${cut(l.project, 20)}` : ""}) until ${l.expires_at.slice(0, 16)}Z`
const orphanLine = (w: OrphanedWork) => `${cut(w.work_id, 30)} "${cut(w.title, 40)}" (claimant ${w.reason})`

/** The lines, joined and bounded: a brief cut short ends with a pointer to the whole picture. */
const bounded = (lines: ReadonlyArray<string>) => {
  const kept: Array<string> = []
  let size = 0
  for (const line of lines) {
    if (size + line.length + 1 > MAX_CHARS) {
      kept.push("(more: sophia_orient has the whole picture)")
      break
    }
    kept.push(line)
    size += line.length + 1
  }
  return kept.join("\n")
}

export const makeBrief = Effect.gen(function*() {
  const coordination = yield* Coordination
  const waits = yield* Waits
  const ledger = yield* Ledger
  const approvals = yield* Approvals
  const leases = yield* Leases

  return (caller: Caller): Effect.Effect<string> =>
    Effect.gen(function*() {
      const unread = yield* coordination.unreadCount(caller)
      const toMe = unread > 0 ? yield* coordination.countToMe(caller) : 0
      const flags = yield* waits.flags(caller)
      // (read without delivering: the brief tells what is open; resolutions reach the agent with its next hook or call)
      const blocking = flags.open ? (yield* waits.signalsAfter(caller, { open: true, undelivered: false }, false)).blocking : []
      const workItems = yield* ledger.countWork(caller.userId)
      const claimed = workItems > 0 ? yield* ledger.claimedBy(caller.userId, caller.connectionId) : []
      const orphanedWork = workItems > 0 ? yield* ledger.orphanedWork(caller.userId) : []
      const held = yield* leases.mine(caller)
      const orphanedWaits = (yield* waits.countOpen(caller.userId)) > 0 ? yield* waits.countOrphaned(caller) : 0
      const pending = yield* approvals.pendingOfCaller(caller)

      const lines = [
        `Sophia, the agents' coordination server: you are ${cut(caller.name, 60)} (connection ${caller.connectionShort}, profile ${caller.profile}).`,
        unread === 0
          ? "Unread posts: none."
          : `Unread posts: ${unread}${toMe > 0 ? `, ${toMe} addressed to you` : ""}; sophia_coordination_inbox reads them${
            toMe > 0 ? " (to_me: true, yours only)" : ""
          }.`,
        ...listed("Your open waits", blocking, waitLine),
        ...listed("Your claimed work", claimed, workLine),
        ...listed("Your leases", held, leaseLine),
        ...listed("Orphaned work you may claim", orphanedWork, orphanLine),
        ...(orphanedWaits > 0 ? [`Orphaned waits (nobody left to answer them): ${orphanedWaits}; sophia_wait_graph lists them.`] : []),
        ...listed("Your pending approvals", pending, (a) => `${a.approval_id} (${a.tool})`),
        ...(pending.length > 0 ? ["Wait for the owner's decision with sophia_approval_status, then repeat the call with approval_id."] : []),
        "New posts of others reach you after each prompt and tool call; a post addressed to you, or a wait of yours that resolved, reaches you before you stop."
      ]
      return bounded(lines)
    })
})
