import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Clock, Config, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { ApprovalInfo, ApprovalStatusInput, ApprovalStatusResult, ElicitAnswer } from "../domain/Approvals.js"
import { argsHash, boundArgs } from "../domain/Approvals.js"
import type { Caller } from "../domain/Auth.js"
import { ApprovalDenied, ApprovalRequired, NotFound, OwnerApprovalRequired, RateLimited, ValidationError } from "../domain/Errors.js"
import { ApprovalDecided, ApprovalRequested } from "../domain/Events.js"
import { PendingApproval } from "../domain/Panorama.js"
import { nowIso } from "../domain/Time.js"
import { makeOwnerView } from "./approvals/OwnerView.js"
import { Auth } from "./Auth.js"
import { Events } from "./Events.js"
import { spanned } from "./Spans.js"
import { serialize } from "./store/Locking.js"
import { makeStatements } from "./store/Statements.js"
import type { PollOwner } from "./Wakeups.js"
import { Wakeups } from "./Wakeups.js"

const ApprovalRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  connection_id: Schema.String,
  tool: Schema.String,
  access: Schema.String,
  args_hash: Schema.String,
  args: Schema.String,
  status: Schema.Literal("pending", "approved", "denied", "executed"),
  created_at: Schema.String,
  decided_at: Schema.NullOr(Schema.String),
  decided_via: Schema.NullOr(Schema.String),
  executed_at: Schema.NullOr(Schema.String),
  result: Schema.NullOr(Schema.String)
})
type ApprovalRow = typeof ApprovalRow.Type
const decodeApprovals = Schema.decodeUnknown(Schema.Array(ApprovalRow))
const decodeDecided = Schema.decodeUnknown(Schema.Array(Schema.Struct({ user_id: Schema.String, connection_id: Schema.String })))
/** A decided approval, as another process's decision is reported (`decidedAmong`). */
const DecidedRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  connection_id: Schema.String,
  status: Schema.Literal("approved", "denied", "executed"),
  decided_at: Schema.NullOr(Schema.String),
  decided_via: Schema.NullOr(Schema.String)
})
const decodeDecidedRows = Schema.decodeUnknown(Schema.Array(DecidedRow))
/** Pending approvals one connection may have at once, by default (docs/architecture.md, Limits). */
export const PENDING_APPROVALS_PER_CONNECTION = 50
export const PENDING_APPROVALS_SETTING = "SOPHIA_PENDING_APPROVALS_PER_CONNECTION"
/** Approval ids asked about in one statement. */
const IDS_AT_ONCE = 500
const COLUMNS = "id, user_id, connection_id, tool, access, args_hash, args, status, created_at, decided_at, decided_via, executed_at, result"

/** The tool a gated call is for. */
interface GatedTool {
  readonly name: string
  readonly access: string
}

export interface GateRequest<A, E> {
  readonly caller: Caller
  readonly tool: GatedTool
  /**
   * "approval": a plain write (elicitation may answer, on a connection the owner minted with that allowance);
   * "owner_approval": elevated (the owner's channel only)
   */
  readonly decision: "approval" | "owner_approval"
  /** the raw arguments of the call (`approval_id` included, ignored by the binding) */
  readonly args: unknown
  /** ask the client's user (MCP elicitation); absent when the client did not declare it */
  readonly elicit?: ((message: string) => Effect.Effect<ElicitAnswer>) | undefined
  /** the call itself; runs at most once per approval, and its JSON result is what every retry gets */
  readonly execute: Effect.Effect<A, E>
  /** every effect of `execute` is in the database: it may be run once, rolled back, to refuse early */
  readonly dryRunSafe?: boolean | undefined
}

/** A claim marker written by the conditional update that wins the right to execute (replaced by the result). */
const CLAIM_PREFIX = "claim:"

/** The dry run's way out: its transaction always rolls back. */
class DryRunSucceeded {
  readonly _tag = "DryRunSucceeded"
}

const decodePendingOfCaller = Schema.decodeUnknown(Schema.Array(PendingApproval))

/** Every statement on `approvals`, by name, and the rows they read, decoded. */
const makeApprovalRows = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, namedValues, shaped } = yield* makeStatements
  const columns = sql.literal(COLUMNS)
  const byIdRows = named("Approvals.byId", (p: { id: string }) => sql`SELECT ${columns} FROM approvals WHERE id = ${p.id}`)
  const openRows = named("Approvals.openOfBinding", (p: { connectionId: string; tool: string; hash: string }) =>
    sql`SELECT ${columns} FROM approvals WHERE connection_id = ${p.connectionId}
      AND tool = ${p.tool} AND args_hash = ${p.hash} AND status IN ('pending', 'approved')
      ORDER BY created_at, id LIMIT 1`)
  const insert = named("Approvals.insert", (p: {
    id: string
    userId: string
    connectionId: string
    tool: string
    access: string
    hash: string
    args: string
    at: string
  }) =>
    sql`INSERT INTO approvals (id, user_id, connection_id, tool, access, args_hash, args, status, created_at)
      VALUES (${p.id}, ${p.userId}, ${p.connectionId}, ${p.tool}, ${p.access}, ${p.hash}, ${p.args}, 'pending', ${p.at})`)
  const decideRow = named("Approvals.decide", (p: { id: string; status: string; at: string; via: string }) =>
    sql`UPDATE approvals SET status = ${p.status}, decided_at = ${p.at}, decided_via = ${p.via}
      WHERE id = ${p.id} AND status = 'pending' RETURNING user_id, connection_id`)
  const claim = named("Approvals.claim", (p: { id: string; at: string; token: string }) =>
    sql`UPDATE approvals SET status = 'executed', executed_at = ${p.at}, result = ${p.token}
      WHERE id = ${p.id} AND status = 'approved'`)
  const storeResult = named("Approvals.storeResult", (p: { id: string; result: string }) =>
    sql`UPDATE approvals SET result = ${p.result} WHERE id = ${p.id}`)
  const pendingRows = named("Approvals.pending", () => sql`SELECT ${columns} FROM approvals WHERE status = 'pending' ORDER BY created_at, id`)
  const allRows = named("Approvals.all", () => sql`SELECT ${columns} FROM approvals ORDER BY created_at, id`)

  const pendingOfCallerRows = named("Approvals.pendingOfCaller", (p: { userId: string; connectionId: string }) =>
    sql`SELECT id AS approval_id, tool, created_at FROM approvals
      WHERE connection_id = ${p.connectionId} AND user_id = ${p.userId} AND status = 'pending' ORDER BY created_at, id`)
  const pendingCount = namedValues("Approvals.pendingOfConnection", (p: { connectionId: string }) =>
    sql`SELECT COUNT(*) FROM approvals WHERE connection_id = ${p.connectionId} AND status = 'pending'`)
  const decidedAmongRows = shaped("Approvals.decidedAmong", 64, (p: { ids: ReadonlyArray<string> }) =>
    sql`SELECT id, user_id, connection_id, status, decided_at, decided_via FROM approvals
      WHERE ${sql.in("id", p.ids)} AND status <> 'pending'`)

  const byId = (id: string) => byIdRows({ id }).pipe(Effect.flatMap(decodeApprovals), Effect.map((rows) => Option.fromNullable(rows[0])))
  return {
    sql,
    byId,
    mustExist: (id: string) => Effect.map(byId(id), Option.getOrThrow),
    openOfBinding: (connectionId: string, tool: string, hash: string) =>
      Effect.map(Effect.flatMap(openRows({ connectionId, tool, hash }), decodeApprovals), (rows) => Option.fromNullable(rows[0])),
    insert,
    decided: (id: string, status: string, at: string, via: string) => Effect.flatMap(decideRow({ id, status, at, via }), decodeDecided),
    claim,
    storeResult,
    pending: Effect.flatMap(pendingRows({}), decodeApprovals),
    all: Effect.flatMap(allRows({}), decodeApprovals),
    pendingOfCaller: (userId: string, connectionId: string) =>
      Effect.flatMap(pendingOfCallerRows({ userId, connectionId }), decodePendingOfCaller),
    pendingOf: (connectionId: string) => Effect.map(pendingCount({ connectionId }), (rows) => Number(rows[0][0])),
    decidedAmong: (ids: ReadonlyArray<string>) => Effect.flatMap(decidedAmongRows({ ids }), decodeDecidedRows)
  } as const
})
type ApprovalRows = Effect.Effect.Success<typeof makeApprovalRows>
type EventsService = Effect.Effect.Success<typeof Events>
type WakeupsService = Effect.Effect.Success<typeof Wakeups>

/**
 * Decisions: made once (a conditional update, with `ApprovalDecided` published in its transaction) and
 * waited for (at most `ms`): a poll parked in Wakeups, woken by `ApprovalDecided` — this daemon's, another
 * daemon's, or a decision another process made (the `sophia approvals` CLI), which `ForeignWrites` finds for
 * every approval waited on at once (wakeups/Foreign.ts); no timer per poll. The waits of one connection on
 * one approval share each read; each connection holds at most `SOPHIA_APPROVAL_POLLS_PER_CONNECTION` of them.
 */
const makeDecisions = (rows: ApprovalRows, events: EventsService, wakeups: WakeupsService) => {
  const setDecision = (id: string, status: "approved" | "denied", via: string) =>
    Effect.gen(function*() {
      const at = yield* nowIso
      for (const d of yield* rows.decided(id, status, at, via)) {
        yield* events.publish(new ApprovalDecided({ user_id: d.user_id, approval_id: id, connection_id: d.connection_id, status, via, at }))
      }
      return yield* rows.mustExist(id)
    }).pipe(events.transaction)

  /** Wait for `row`'s decision as `owner` (the caller's connection); parks before it reads, so no decision is missed. */
  const awaitDecision = (owner: PollOwner, row: ApprovalRow, ms: number) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      wakeups.poll("approval", {
        owner,
        key: `approval:${row.id}`,
        matches: (e) => e._tag === "ApprovalDecided" && e.approval_id === row.id,
        sharing: "shared",
        deadline: now + ms,
        read: rows.mustExist(row.id),
        found: (r) => r.status !== "pending"
      }))

  return { setDecision, awaitDecision } as const
}
type Decisions = ReturnType<typeof makeDecisions>

const hintFor = (id: string) =>
  `wait for the owner's decision with sophia.approval_status({ approval_id: "${id}", wait_s: 60 }); ` +
  `once approved, repeat this exact call with approval_id: "${id}" (it runs once)`

/** The refusal of a call whose approval is pending; `setAside`: why the approval it named was not used. */
const pendingRefusal = (request: { readonly tool: GatedTool; readonly decision: string }, id: string, setAside?: string) => {
  const first = setAside === undefined ? "" : `${setAside}; this call needs its own approval, ${id}: `
  return request.decision === "owner_approval"
    ? new OwnerApprovalRequired({
      tool: request.tool.name,
      approval_id: id,
      reason: `${first}elevated tools always need the owner's explicit gesture; the owner approves with \`sophia approvals approve ${id}\`, then repeat the same call with approval_id`,
      hint: hintFor(id)
    })
    : new ApprovalRequired({
      tool: request.tool.name,
      approval_id: id,
      reason: `${first}this connection needs a per-call approval for writes; once the owner approves (\`sophia approvals approve ${id}\`), repeat the same call with approval_id`,
      hint: hintFor(id)
    })
}

/** The approval flow of one gated call (see the `Approvals` comment). */
const makeGate = (rows: ApprovalRows, events: EventsService, decisions: Decisions, waitMs: number, pendingCap: number) => {
  /**
   * A new pending approval for this binding, published with its creation (the owner has something to decide) —
   * unless the connection already has `pendingCap` pending: then `RateLimited`, until the owner decides some.
   */
  const create = (caller: Caller, tool: GatedTool, args: unknown, hash: string) =>
    Effect.gen(function*() {
      // counted and created under the connection's lock (store/Locking.ts): two daemons never both take the last place
      yield* serialize(rows.sql, `approvals-pending/${caller.connectionId}`)
      if ((yield* rows.pendingOf(caller.connectionId)) >= pendingCap) {
        return yield* new RateLimited({
          what: "pending approvals",
          limit: pendingCap,
          retry_after_s: 60,
          setting: PENDING_APPROVALS_SETTING,
          hint: "wait for the owner to decide this connection's pending approvals (sophia.approval_status with wait_s) before asking for more"
        })
      }
      const id = `apr-${randomUUID()}`
      const at = yield* nowIso
      const bound = JSON.stringify(boundArgs(args))
      yield* rows.insert({ id, userId: caller.userId, connectionId: caller.connectionId, tool: tool.name, access: tool.access, hash, args: bound, at })
      yield* events.publish(
        new ApprovalRequested({ user_id: caller.userId, approval_id: id, connection_id: caller.connectionId, tool: tool.name, access: tool.access, at })
      )
      return yield* rows.mustExist(id)
    })

  /** The approval this call is bound to: the one it names when it matches, else an open one for the same binding, else a new one. */
  const bind = (caller: Caller, tool: GatedTool, args: unknown) =>
    Effect.gen(function*() {
      const hash = argsHash(args)
      const named = typeof args === "object" && args !== null && typeof (args as any).approval_id === "string"
        ? (args as { approval_id: string }).approval_id
        : undefined
      // an approval is bound to its caller, tool and arguments: anything else needs a new approval, and the
      // refusal says why the one named was not used (a changed argument is never silently approved)
      let setAside: string | undefined
      if (named !== undefined) {
        const row = yield* rows.byId(named)
        if (Option.isNone(row) || row.value.connection_id !== caller.connectionId) {
          setAside = `approval_id ${named} is not an approval of this connection`
        } else if (row.value.tool !== tool.name) {
          setAside = `approval ${named} was given for ${row.value.tool}, not ${tool.name}`
        } else if (row.value.args_hash !== hash) {
          setAside = `approval ${named} was given for other arguments of ${tool.name}: an approval runs only the exact call it was asked for`
        } else {
          return { row: row.value, setAside }
        }
      }
      // find-or-create is one decision per binding: serialized (advisory lock, store/Locking.ts), so the same
      // call retried on two daemons at once binds to one approval, never two
      yield* serialize(rows.sql, `approval/${caller.connectionId}/${tool.name}/${hash}`)
      const open = yield* rows.openOfBinding(caller.connectionId, tool.name, hash)
      return { row: Option.isSome(open) ? open.value : yield* create(caller, tool, args, hash), setAside }
    }).pipe(events.transaction)

  /**
   * Run the call of an approved approval, once. The conditional update claims it (only one caller can move
   * it from `approved`); the call's own writes and the stored result commit in the same transaction, so a
   * refused or failed call releases the claim and writes nothing. Every later retry gets the stored result.
   */
  const executeOnce = <A, E>(id: string, execute: Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const token = CLAIM_PREFIX + randomUUID()
      // Execute-once across writers: this conditional UPDATE takes the row lock, so a concurrent claimant
      // (another daemon) blocks on it until this transaction ends, then re-reads the row (READ COMMITTED)
      // and finds it `executed` with our stored result (0 rows: it replays) — or, if we rolled back,
      // `approved` again and claims it itself. On SQLite the single writer gives the same order.
      yield* rows.claim({ id, at: yield* nowIso, token })
      const row = yield* rows.mustExist(id)
      if (row.result !== token) return JSON.parse(row.result ?? "null") as A
      const result = yield* execute
      yield* rows.storeResult({ id, result: JSON.stringify(result) })
      return result
    }).pipe(events.transaction)

  /**
   * Run the call in a transaction that is always rolled back: a call the service would refuse anyway is
   * refused now, before an approval is asked for (the owner is never asked to approve a call that
   * cannot succeed). Nothing it wrote survives.
   */
  const dryRun = <A, E>(execute: Effect.Effect<A, E>): Effect.Effect<void, E> =>
    execute.pipe(
      Effect.zipRight(Effect.fail(new DryRunSucceeded())),
      events.transaction,
      Effect.catchIf((e): e is DryRunSucceeded => e instanceof DryRunSucceeded, () => Effect.void),
      Effect.catchIf((e): e is SqlError => e instanceof SqlError, (e) => Effect.die(e))
    )

  return <A, E>(request: GateRequest<A, E>) =>
    Effect.gen(function*() {
      yield* Effect.annotateCurrentSpan("tool", request.tool.name)
      // a re-call naming its approval gets the decision (and, once executed, the stored result) as is
      const namesApproval = typeof request.args === "object" && request.args !== null && "approval_id" in request.args
      if (!namesApproval && request.dryRunSafe === true) yield* dryRun(request.execute)
      const bound = yield* bind(request.caller, request.tool, request.args)
      let row = bound.row
      // the requesting agent's own client never decides for the owner: its answer approves a plain write only on
      // a connection the owner minted with that allowance (`allow_elicitation`), never an elevated call
      const mayElicit = request.decision === "approval" && request.caller.allowElicitation === true
      if (row.status === "pending" && mayElicit && request.elicit !== undefined) {
        const answer = yield* request.elicit(
          `Allow ${request.caller.name} (${request.caller.connectionShort}) to call ${request.tool.name} with ${
            JSON.stringify(boundArgs(request.args)).slice(0, 2000)
          }?`
        )
        if (answer !== "cancel") row = yield* decisions.setDecision(row.id, answer === "accept" ? "approved" : "denied", "elicitation")
      }
      if (row.status === "pending" && waitMs > 0) {
        // (at the cap on parked approval waits the call does not wait: it is refused pending at once, as by default)
        const pending = row
        row = yield* decisions.awaitDecision(request.caller, pending, waitMs).pipe(Effect.catchTag("RateLimited", () => Effect.succeed(pending)))
      }
      switch (row.status) {
        case "pending":
          return yield* pendingRefusal(request, row.id, bound.setAside)
        case "denied":
          return yield* new ApprovalDenied({ tool: request.tool.name, approval_id: row.id })
        case "approved":
        case "executed":
          return yield* executeOnce(row.id, request.execute)
      }
    }).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die))
}

/**
 * Approvals bound to (connection, tool, hash of the exact arguments). A gated call creates (or finds) its
 * pending approval — a new one publishes `ApprovalRequested` with its creation — asks through elicitation
 * when it may (a plain write, on a connection allowed it), waits a bounded time for a decision
 * (`SOPHIA_APPROVAL_WAIT_MS`), and then either runs —
 * exactly once, claimed by a conditional update in the same transaction as the call's own writes — or is
 * refused with the approval id to repeat the call with. Owns `approvals`.
 */
export class Approvals extends Effect.Service<Approvals>()("sophia/Approvals", {
  effect: Effect.gen(function*() {
    const auth = yield* Auth
    const events = yield* Events
    const wakeups = yield* Wakeups
    const rows = yield* makeApprovalRows
    // how long a gated call itself waits for a decision: none by default (refused at once, with a hint)
    const waitMs = yield* Config.integer("SOPHIA_APPROVAL_WAIT_MS").pipe(Config.withDefault(0), Effect.orDie)
    const pendingCap = yield* Config.integer(PENDING_APPROVALS_SETTING).pipe(
      Config.withDefault(PENDING_APPROVALS_PER_CONNECTION),
      Effect.orDie
    )
    const decisions = makeDecisions(rows, events, wakeups)

    /** Gate one call (see the class comment); the span is `Approvals.gate`, tagged with the tool. */
    const gate = spanned("Approvals.gate", makeGate(rows, events, decisions, waitMs, Math.max(1, pendingCap)))

    /** Rows as the owner sees them, names joined live through Auth. */
    const toInfos = (approvals: ReadonlyArray<ApprovalRow>) =>
      Effect.map(auth.connections(approvals.map((r) => r.connection_id)), (connections) =>
        approvals.map((r): ApprovalInfo => ({
          approval_id: r.id,
          status: r.status,
          tool: r.tool,
          access: r.access,
          user_name: connections.get(r.connection_id)?.user_name ?? "",
          connection_id: r.connection_id,
          connection_name: connections.get(r.connection_id)?.name ?? "",
          args: JSON.parse(r.args),
          args_hash: r.args_hash,
          created_at: r.created_at,
          decided_at: r.decided_at,
          decided_via: r.decided_via,
          executed_at: r.executed_at
        })))

    /** The owner's view: pending approvals (or all of them), oldest first. */
    const list = spanned(
      "Approvals.list",
      Effect.fnUntraced(function*(options: { readonly all?: boolean } = {}) {
        return yield* toInfos(yield* (options.all === true ? rows.all : rows.pending))
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** The caller's own pending approvals, oldest first (at most the per-connection cap: `panorama`). */
    const pendingOfCaller = spanned("Approvals.pendingOfCaller", (caller: Caller) =>
      rows.pendingOfCaller(caller.userId, caller.connectionId).pipe(Effect.catchTag("SqlError", "ParseError", Effect.die)))

    // the owner's portal, light however many are pending: a page at a time with the head of each one's
    // arguments, one approval in full, and the stamp its live check compares (approvals/OwnerView.ts)
    const { pendingPage, recentlyDecided, approvalInFull, stamp, pendingCount } = yield* makeOwnerView

    /** The owner's gesture: approve or deny a pending approval (the CLI, the portal). */
    const decide = spanned(
      "Approvals.decide",
      Effect.fnUntraced(function*(id: string, decision: "approved" | "denied", via = "cli") {
        const row = yield* rows.byId(id)
        if (Option.isNone(row)) return yield* new NotFound({ what: "approval", id })
        if (row.value.status !== "pending") {
          return yield* new ValidationError({ detail: `approval ${id} is already ${row.value.status}` })
        }
        const decided = yield* decisions.setDecision(id, decision, via)
        return (yield* toInfos([decided]))[0]
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /**
     * `sophia.approval_status`: where an approval of the caller's user stands; with `wait_s`, a long poll
     * while it is pending (ends at the decision or the deadline, never later).
     */
    const status = spanned(
      "Approvals.status",
      Effect.fnUntraced(function*(caller: Caller, input: ApprovalStatusInput) {
        const found = yield* rows.byId(input.approval_id)
        if (Option.isNone(found) || found.value.user_id !== caller.userId) {
          return yield* new NotFound({ what: "approval", id: input.approval_id })
        }
        const waitS = input.wait_s ?? 0
        const row = found.value.status === "pending" && waitS > 0
          ? yield* decisions.awaitDecision(caller, found.value, Math.round(waitS * 1000))
          : found.value
        const result: ApprovalStatusResult = {
          approval_id: row.id,
          tool: row.tool,
          status: row.status,
          ...(row.decided_at !== null ? { decided_at: row.decided_at } : {}),
          ...(row.status === "approved"
            ? { hint: `repeat the same ${row.tool} call with approval_id: "${row.id}"; it runs once` }
            : row.status === "pending"
            ? { hint: `still pending: call again with wait_s (≤ 60) to keep waiting` }
            : {})
        }
        return result
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /**
     * The decisions among these approvals, as the events that said them: how `ForeignWrites` (wakeups/Foreign.ts)
     * reports decisions another process made (the CLI's publish nothing here). Statements of at most 500 ids.
     */
    const decisionsAmong = spanned(
      "Approvals.decisionsAmong",
      Effect.fnUntraced(function*(ids: ReadonlyArray<string>) {
        const decided: Array<ApprovalDecided> = []
        for (let i = 0; i < ids.length; i += IDS_AT_ONCE) {
          for (const r of yield* rows.decidedAmong(ids.slice(i, i + IDS_AT_ONCE))) {
            decided.push(new ApprovalDecided({
              user_id: r.user_id,
              approval_id: r.id,
              connection_id: r.connection_id,
              status: r.status === "denied" ? "denied" : "approved",
              via: r.decided_via ?? "cli",
              at: r.decided_at ?? ""
            }))
          }
        }
        return decided
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    return { gate, list, pendingOfCaller, decide, status, waitMs, decisionsAmong, pendingPage, recentlyDecided, approvalInFull, stamp, pendingCount } as const
  })
}) {}
