import { Effect, Option, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { ChannelName } from "../../domain/Coordination.js"
import { ValidationError } from "../../domain/Errors.js"
import { SearchDocumentsInput } from "../../domain/Knowledge.js"
import { LedgerDiffInput, WorkRef } from "../../domain/Ledger.js"
import { Approvals } from "../../services/Approvals.js"
import { Auth } from "../../services/Auth.js"
import { Coordination } from "../../services/Coordination.js"
import { Knowledge } from "../../services/Knowledge.js"
import { Leases } from "../../services/Leases.js"
import { Notifications } from "../../services/Notifications.js"
import { Ledger } from "../../services/Ledger.js"
import { ReadModel } from "../../services/readmodel/ReadModel.js"
import { Waits } from "../../services/Waits.js"
import { formatParseError } from "../ParseIssues.js"
import type { Html } from "./Html.js"
import { html } from "./Html.js"
import { fleetLeases, workLeases } from "./Leases.js"
import { addTargetForm, notificationsBody } from "./Notifications.js"
import * as Pages from "./Pages.js"
import { uuidsIn } from "./Words.js"

/** What a page's live region is rendered from: the session's frame, the portal's caller, the query string. */
export interface RegionInput {
  readonly frame: Pages.Frame
  readonly caller: Caller
  readonly query: URLSearchParams
}

/** A page: its name, the live events that refresh its region, and what is shown above the region. */
export interface Page {
  readonly name: Pages.PageName
  readonly live: ReadonlyArray<string>
  readonly extra?: (csrf: string, query: URLSearchParams) => Html
}

export const PAGES: Readonly<Record<string, Page>> = {
  "/portal": { name: "Fleet", live: ["fleet", "posts", "waits", "ledger"], extra: (csrf) => Pages.createForm(csrf) },
  "/portal/approvals": { name: "Approvals", live: ["approvals"] },
  "/portal/channels": { name: "Channels", live: ["posts"] },
  "/portal/waits": { name: "Waits", live: ["waits"] },
  "/portal/ledger": {
    name: "Ledger",
    live: ["ledger"],
    extra: (csrf, query) => query.get("work") ? html`` : Pages.form(csrf, "/portal/ledger/verify", "Verify ledger")
  },
  // the search form stands above the region, so a refresh never drops what is being typed into it
  "/portal/knowledge": { name: "Knowledge", live: ["knowledge"], extra: (_csrf, query) => Pages.knowledgeSearchForm((query.get("q") ?? "").trim()) },
  "/portal/notifications": { name: "Notifications", live: [], extra: (csrf) => addTargetForm(csrf) }
}

/** The longest approval id looked up (ids are `apr-` and a UUID; `approval_id` arguments are at most 128). */
const APPROVAL_ID_MAX = 128

/** Documents on one page of the Knowledge listing. */
const DOCUMENTS_PER_PAGE = 50

/** A query-string value decoded as the tool's input would be (a refusal's message when it is not). */
const decode = <A, I>(schema: Schema.Schema<A, I>, input: unknown) =>
  Schema.decodeUnknown(schema)(input).pipe(Effect.mapError((e) => new ValidationError({ detail: formatParseError(e) })))

/**
 * Each page's live region, read through the services that own what it shows (the Fleet through the read
 * model, `ReadModel.fleet`) and rendered by `Pages`. A refusal (an unknown work item, a malformed head) is the region's
 * message, never a failed page.
 */
export const makeRegions = Effect.gen(function*() {
  const readModel = yield* ReadModel
  const approvals = yield* Approvals
  const auth = yield* Auth
  const coordination = yield* Coordination
  const waits = yield* Waits
  const ledger = yield* Ledger
  const knowledge = yield* Knowledge
  const leases = yield* Leases
  const notifications = yield* Notifications

  const fleetRegion = ({ frame }: RegionInput) =>
    Effect.map(readModel.fleet(), (view) =>
      html`${Pages.fleetBody(frame.csrf, view)}${fleetLeases(frame.csrf, view.connections.flatMap((c) => c.leases))}`)

  /**
   * A page of the pending approvals (newest first; `before`/`after` a cursor) with the head of each one's
   * arguments and the most recently decided, or (`approval`) one approval with all of its arguments.
   */
  const approvalsRegion = ({ frame, query }: RegionInput) =>
    Effect.gen(function*() {
      const one = query.get("approval")
      if (one !== null) {
        const found = one.length <= APPROVAL_ID_MAX ? yield* approvals.approvalInFull(one) : Option.none()
        return Pages.approvalBody(frame.csrf, one.slice(0, APPROVAL_ID_MAX), Option.getOrUndefined(found), frame.scoped === true)
      }
      const page = yield* approvals.pendingPage({
        before: Pages.approvalCursorOf(query.get("before")),
        after: Pages.approvalCursorOf(query.get("after"))
      })
      return Pages.approvalsBody(frame.csrf, page, yield* approvals.recentlyDecided())
    })

  /**
   * Every channel (archived ones and heartbeats included) and one conversation, read without marking: the
   * channel asked for, else the most recently active one (`Pages.openingChannel`).
   */
  const channelsRegion = ({ caller, query }: RegionInput) =>
    Effect.gen(function*() {
      const asked = query.get("channel") ?? undefined
      const everything = { peek: true, include_archived: true, include_heartbeats: true } as const
      const channel = asked === undefined
        ? Pages.openingChannel((yield* coordination.inbox(caller, { ...everything, limit: 1 })).channels)
        : yield* decode(ChannelName, asked)
      if (channel === undefined) return Pages.channelsBody([], undefined, [])
      const read = yield* coordination.inbox(caller, { ...everything, channel, unread_only: false, limit: 200 })
      const targeted = read.posts.filter((p) => p.to_connection_id !== null).map((p) => p.post_id)
      const receipts = yield* coordination.targetReceipts(caller.userId, targeted)
      return Pages.channelsBody(read.channels, channel, read.posts, asked === undefined, receipts)
    })

  /** The wait graph, with the names of the connections its predicates and orphaned claims hold by id. */
  const waitsRegion = ({ caller }: RegionInput) =>
    Effect.gen(function*() {
      const graph = yield* waits.graph(caller)
      const names = yield* auth.names([...graph.edges.flatMap((e) => uuidsIn(e.predicate)), ...graph.orphaned.work.map((w) => w.connection_id)])
      return Pages.waitsBody(graph, names)
    })

  const ledgerRegion = ({ caller, query }: RegionInput) =>
    Effect.gen(function*() {
      const work = query.get("work")
      if (!work) {
        const items = yield* ledger.listWork(caller.userId, 200)
        const names = yield* auth.names(items.flatMap((i) => (i.claimant ? [i.claimant] : [])))
        return Pages.ledgerListBody(items, names)
      }
      const { work_id } = yield* decode(WorkRef, { work_id: work })
      const status = yield* ledger.status(caller, work_id)
      const events = yield* ledger.events(caller.userId, work_id)
      const from = query.get("from") ?? undefined
      const to = query.get("to") ?? undefined
      const diff = from === undefined
        ? undefined
        : yield* ledger.diff(caller, yield* decode(LedgerDiffInput, { work_id, from, ...(to ? { to } : {}) }))
      const names = yield* auth.names(events.map((e) => e.actor).concat(status.settled.claimant ? [status.settled.claimant] : []))
      return html`${Pages.ledgerItemBody(status, events, diff, names, from, to)}${workLeases(yield* leases.ofWork(caller.userId, work_id))}`
    })

  /** Documents (a search's hits, or the newest first, a page at a time), facts, and the mutation journal. */
  const knowledgeRegion = ({ frame, caller, query }: RegionInput) =>
    Effect.gen(function*() {
      const q = (query.get("q") ?? "").trim()
      const before = Pages.documentsCursorOf(query.get("before"))
      const documents: Pages.DocumentsShown = q !== ""
        ? { _tag: "Search", query: q, hits: (yield* knowledge.search(caller, yield* decode(SearchDocumentsInput, { query: q, limit: 50 }))).items }
        : {
          _tag: "Newest",
          total: yield* knowledge.countDocuments(caller),
          page: yield* knowledge.recentDocuments(caller, DOCUMENTS_PER_PAGE, before),
          paged: before !== undefined
        }
      const facts = (yield* knowledge.query(caller, { limit: 100 })).facts
      const journal = yield* knowledge.mutations(caller, 50)
      const names = yield* auth.names(journal.map((m) => m.connection_id))
      return Pages.knowledgeBody(frame.csrf, documents, facts, journal, names)
    })

  /** The session user's notification targets, dead letters and newest notifications. */
  const notificationsRegion = ({ frame, caller }: RegionInput) =>
    Effect.gen(function*() {
      const targets = yield* notifications.listTargets(caller.userId)
      return notificationsBody(frame.csrf, targets, yield* notifications.notifications(caller.userId))
    })

  const regions: Readonly<Record<string, (input: RegionInput) => Effect.Effect<Html, { readonly message: string }>>> = {
    "/portal": fleetRegion,
    "/portal/approvals": approvalsRegion,
    "/portal/channels": channelsRegion,
    "/portal/waits": waitsRegion,
    "/portal/ledger": ledgerRegion,
    "/portal/knowledge": knowledgeRegion,
    "/portal/notifications": notificationsRegion
  }

  /** The live region of the page at `path` (one of `PAGES`): its HTML, or the refusal's message. */
  const regionOf = (path: string, input: RegionInput): Effect.Effect<Html, string> =>
    Effect.mapError(regions[path]!(input), (refusal) => refusal.message)

  return { regionOf } as const
})
