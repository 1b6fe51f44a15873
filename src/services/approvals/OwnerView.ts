import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { ApprovalStatus } from "../../domain/Approvals.js"
import { DbInt } from "../../domain/Time.js"
import { Auth } from "../Auth.js"
import { spanned } from "../Spans.js"
import { limitTo, makeStatements } from "../store/Statements.js"

/** An approval as the owner's listing shows it: the start of its arguments (their JSON text), not the whole. */
export interface ApprovalSummary {
  readonly approval_id: string
  readonly status: ApprovalStatus
  readonly tool: string
  readonly access: string
  readonly user_name: string
  readonly connection_id: string
  readonly connection_name: string
  /** the first `ARGS_HEAD_CHARS` characters of the arguments' JSON text */
  readonly args_head: string
  /** the length of the whole JSON text, in characters */
  readonly args_chars: number
  /** `args_head` is the whole of it */
  readonly args_whole: boolean
  readonly created_at: string
  readonly decided_at: string | null
  readonly decided_via: string | null
  readonly executed_at: string | null
}

/** An approval with its whole arguments (the owner reads one before deciding it). */
export interface ApprovalInFull extends ApprovalSummary {
  readonly args: unknown
}

/** A place in the newest-first listing of pending approvals. */
export interface ApprovalCursor {
  readonly created_at: string
  readonly approval_id: string
}

/**
 * One page of the pending approvals, newest first, and where its neighbours start: `older` (the page below
 * its last), `newer` (the page above its first; `"newest"` when that is the first page), null where none is.
 */
export interface PendingPage {
  readonly total: number
  readonly items: ReadonlyArray<ApprovalSummary>
  readonly newer: ApprovalCursor | "newest" | null
  readonly older: ApprovalCursor | null
}

/** Pending approvals on one page of the owner's listing. */
export const PENDING_PAGE = 50
/** How much of an approval's arguments a listing carries. */
export const ARGS_HEAD_CHARS = 2000
/** How many decided approvals the owner's view lists (the most recently asked first). */
const RECENTLY_DECIDED = 20

const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String, created_at: Schema.String })))
const SummaryRow = Schema.Struct({
  id: Schema.String,
  connection_id: Schema.String,
  tool: Schema.String,
  access: Schema.String,
  status: ApprovalStatus,
  created_at: Schema.String,
  decided_at: Schema.NullOr(Schema.String),
  decided_via: Schema.NullOr(Schema.String),
  executed_at: Schema.NullOr(Schema.String),
  args_head: Schema.String,
  args_chars: DbInt
})
const decodeSummaries = Schema.decodeUnknown(Schema.Array(SummaryRow))
const decodeInFull = Schema.decodeUnknown(Schema.Array(Schema.extend(SummaryRow, Schema.Struct({ args: Schema.String }))))

/**
 * The owner's view of `approvals` (the portal's Approvals page), light whatever their number: the pending
 * ones a page at a time, newest first, each with the head of its arguments and their length (read in SQL:
 * the rest of a long argument never leaves the store); one approval with its whole arguments; and the
 * stamp the portal's live check compares, read from an index only. A page is found by ids first — the
 * ordering reads `(status, created_at)` and the id — and its rows are read by id, so arguments are read for
 * the rows shown and no others. A module of Approvals (it owns the table).
 */
export const makeOwnerView = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const auth = yield* Auth
  const { named, namedValues, shaped } = yield* makeStatements
  const pageOf = limitTo(sql, PENDING_PAGE + 1)

  const count = namedValues("Approvals.pendingCount", () => sql`SELECT COUNT(*) FROM approvals WHERE status = 'pending'`)
  const newest = named("Approvals.pendingNewest", () =>
    sql`SELECT id, created_at FROM approvals WHERE status = 'pending' ORDER BY created_at DESC, id DESC ${pageOf}`)
  const older = named("Approvals.pendingOlder", (p: { at: string; id: string }) =>
    sql`SELECT id, created_at FROM approvals WHERE status = 'pending'
      AND (created_at < ${p.at} OR (created_at = ${p.at} AND id < ${p.id})) ORDER BY created_at DESC, id DESC ${pageOf}`)
  const newer = named("Approvals.pendingNewer", (p: { at: string; id: string }) =>
    sql`SELECT id, created_at FROM approvals WHERE status = 'pending'
      AND (created_at > ${p.at} OR (created_at = ${p.at} AND id > ${p.id})) ORDER BY created_at, id ${pageOf}`)
  const decided = named("Approvals.recentlyDecidedIds", () =>
    sql`SELECT id, created_at FROM approvals WHERE status <> 'pending' ORDER BY created_at DESC, id DESC ${limitTo(sql, RECENTLY_DECIDED)}`)
  const summaryColumns = sql.literal(
    `id, connection_id, tool, access, status, created_at, decided_at, decided_via, executed_at, substr(args, 1, ${ARGS_HEAD_CHARS}) AS args_head, length(args) AS args_chars`
  )
  const summaries = shaped("Approvals.summaries", 64, (p: { ids: ReadonlyArray<string> }) =>
    sql`SELECT ${summaryColumns} FROM approvals WHERE ${sql.in("id", p.ids)}`)
  const inFull = named("Approvals.inFull", (p: { id: string }) => sql`SELECT ${summaryColumns}, args FROM approvals WHERE id = ${p.id}`)
  // the live check: each status's count — a new approval raises the total, a decision or an execution moves one
  // from a status to the next, so any of them changes it — from the (status, created_at) index alone
  const statusCounts = namedValues("Approvals.statusCounts", () => sql`SELECT status, COUNT(*) FROM approvals GROUP BY status ORDER BY status`)

  /** Rows as the owner sees them, in the order of `ids`, names joined live through Auth. */
  const asSummaries = (ids: ReadonlyArray<string>, rows: ReadonlyArray<typeof SummaryRow.Type>) =>
    Effect.map(auth.connections(rows.map((r) => r.connection_id)), (connections) => {
      const byId = new Map(rows.map((r) => [r.id, r] as const))
      return ids.flatMap((id): Array<ApprovalSummary> => {
        const r = byId.get(id)
        if (r === undefined) return []
        const c = connections.get(r.connection_id)
        return [{
          approval_id: id,
          status: r.status,
          tool: r.tool,
          access: r.access,
          user_name: c?.user_name ?? "",
          connection_id: r.connection_id,
          connection_name: c?.name ?? "",
          args_head: r.args_head,
          args_chars: r.args_chars,
          args_whole: r.args_chars <= ARGS_HEAD_CHARS,
          created_at: r.created_at,
          decided_at: r.decided_at,
          decided_via: r.decided_via,
          executed_at: r.executed_at
        }]
      })
    })
  const summarize = (ids: ReadonlyArray<string>) =>
    ids.length === 0 ? Effect.succeed([]) : Effect.flatMap(Effect.flatMap(summaries({ ids }), decodeSummaries), (rows) => asSummaries(ids, rows))

  const cursorOf = (r: { readonly id: string; readonly created_at: string }): ApprovalCursor => ({ created_at: r.created_at, approval_id: r.id })

  /** How many approvals wait for the owner (a count from the index: no row read). */
  const pendingCount = spanned("Approvals.pendingCount", () => Effect.orDie(Effect.map(count({}), (rows) => Number(rows[0][0]))))

  /**
   * A page of pending approvals, newest first: the newest, the one below `before`, or the one above `after` (the
   * newest page when fewer than a page's worth are above it).
   */
  const pendingPage = spanned(
    "Approvals.pendingPage",
    Effect.fnUntraced(function*(at: { readonly before?: ApprovalCursor | undefined; readonly after?: ApprovalCursor | undefined } = {}) {
      const total = yield* pendingCount()
      const above = at.after === undefined ? [] : yield* Effect.flatMap(newer({ at: at.after.created_at, id: at.after.approval_id }), decodeIds)
      let ids: ReadonlyArray<{ readonly id: string; readonly created_at: string }>
      let newerLink: PendingPage["newer"]
      let olderLink: PendingPage["older"] = null
      if (at.after !== undefined && above.length > PENDING_PAGE) {
        ids = above.slice(0, PENDING_PAGE).reverse()
        newerLink = cursorOf(ids[0])
        olderLink = cursorOf(ids[ids.length - 1])
      } else {
        const before = at.after === undefined ? at.before : undefined
        const rows = yield* Effect.flatMap(
          before === undefined ? newest({}) : older({ at: before.created_at, id: before.approval_id }),
          decodeIds
        )
        ids = rows.slice(0, PENDING_PAGE)
        newerLink = before === undefined ? null : ids.length > 0 ? cursorOf(ids[0]) : "newest"
        if (rows.length > PENDING_PAGE) olderLink = cursorOf(ids[ids.length - 1])
      }
      const items = yield* summarize(ids.map((r) => r.id))
      return { total, items, newer: newerLink, older: olderLink } satisfies PendingPage as PendingPage
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** The most recently asked decided approvals, newest first (a bounded list). */
  const recentlyDecided = spanned(
    "Approvals.recentlyDecided",
    Effect.fnUntraced(function*() {
      return yield* summarize((yield* Effect.flatMap(decided({}), decodeIds)).map((r) => r.id))
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** One approval with its whole arguments, if it exists. */
  const approvalInFull = spanned(
    "Approvals.inFull",
    Effect.fnUntraced(function*(id: string) {
      const rows = yield* Effect.flatMap(inFull({ id }), decodeInFull)
      const [summary] = yield* asSummaries([id], rows)
      return summary === undefined ? Option.none<ApprovalInFull>() : Option.some({ ...summary, args: JSON.parse(rows[0].args) as unknown })
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /**
   * What the approvals are as of now, in a few bytes: it changes whenever an approval is asked, decided or
   * executed, by any process on the store. Read from the `(status, created_at)` index alone — never a row,
   * never an argument — so the portal's live check costs the same with 600 pending approvals as with none.
   */
  const stamp = spanned("Approvals.stamp", () =>
    Effect.orDie(Effect.map(statusCounts({}), (rows) => rows.map(([status, n]) => `${status}:${n}`).join("/"))))

  return { pendingPage, recentlyDecided, approvalInFull, stamp, pendingCount } as const
})
