import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { ChannelName } from "../../domain/Coordination.js"
import { ValidationError } from "../../domain/Errors.js"
import { SearchDocumentsInput } from "../../domain/Knowledge.js"
import { LedgerDiffInput, WorkRef } from "../../domain/Ledger.js"
import { Approvals } from "../../services/Approvals.js"
import { Auth } from "../../services/Auth.js"
import { Coordination } from "../../services/Coordination.js"
import { Knowledge } from "../../services/Knowledge.js"
import { Ledger } from "../../services/Ledger.js"
import { ReadModel } from "../../services/readmodel/ReadModel.js"
import { Waits } from "../../services/Waits.js"
import { formatParseError } from "../ParseIssues.js"
import type { Html } from "./Html.js"
import { html } from "./Html.js"
import * as Pages from "./Pages.js"

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
  "/portal/knowledge": { name: "Knowledge", live: ["knowledge"], extra: (_csrf, query) => Pages.knowledgeSearchForm((query.get("q") ?? "").trim()) }
}

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

  const fleetRegion = ({ frame }: RegionInput) => Effect.map(readModel.fleet(), (view) => Pages.fleetBody(frame.csrf, view))

  const approvalsRegion = ({ frame }: RegionInput) =>
    Effect.gen(function*() {
      const pending = yield* approvals.list()
      const recent = yield* approvals.recentlyDecided()
      return Pages.approvalsBody(frame.csrf, pending, recent)
    })

  /** Every channel (archived ones and heartbeats included) and, with one selected, its conversation, read without marking. */
  const channelsRegion = ({ caller, query }: RegionInput) =>
    Effect.gen(function*() {
      const selected = query.get("channel") ?? undefined
      const everything = { peek: true, include_archived: true, include_heartbeats: true } as const
      if (selected === undefined) {
        const listing = yield* coordination.inbox(caller, { ...everything, limit: 1 })
        return Pages.channelsBody(listing.channels, undefined, [])
      }
      const channel = yield* decode(ChannelName, selected)
      const read = yield* coordination.inbox(caller, { ...everything, channel, unread_only: false, limit: 200 })
      return Pages.channelsBody(read.channels, channel, read.posts)
    })

  const waitsRegion = ({ caller }: RegionInput) => Effect.map(waits.graph(caller), Pages.waitsBody)

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
      return Pages.ledgerItemBody(status, events, diff, names, from, to)
    })

  const knowledgeRegion = ({ frame, caller, query }: RegionInput) =>
    Effect.gen(function*() {
      const q = (query.get("q") ?? "").trim()
      const documents = q === "" ? [] : (yield* knowledge.search(caller, yield* decode(SearchDocumentsInput, { query: q, limit: 50 }))).items
      const facts = (yield* knowledge.query(caller, { limit: 100 })).facts
      const journal = yield* knowledge.mutations(caller, 50)
      const names = yield* auth.names(journal.map((m) => m.connection_id))
      return Pages.knowledgeBody(frame.csrf, q, documents, facts, journal, names)
    })

  const regions: Readonly<Record<string, (input: RegionInput) => Effect.Effect<Html, { readonly message: string }>>> = {
    "/portal": fleetRegion,
    "/portal/approvals": approvalsRegion,
    "/portal/channels": channelsRegion,
    "/portal/waits": waitsRegion,
    "/portal/ledger": ledgerRegion,
    "/portal/knowledge": knowledgeRegion
  }

  /** The live region of the page at `path` (one of `PAGES`): its HTML, or the refusal's message. */
  const regionOf = (path: string, input: RegionInput): Effect.Effect<Html, string> =>
    Effect.mapError(regions[path]!(input), (refusal) => refusal.message)

  return { regionOf } as const
})
