/**
 * The owner's commands over an existing graph: `connection create|list|revoke|rename`, `ledger verify`,
 * `approvals list|approve|deny`, `backup`. Each prints its result as JSON on stdout (`connection list`
 * as a table unless `--json`).
 */
import { Console, Effect, Option } from "effect"
import type { Globals } from "./Store.js"
import { backupSqlite } from "../layers/Services.js"
import { Approvals } from "../services/Approvals.js"
import { Auth } from "../services/Auth.js"
import { Ledger } from "../services/Ledger.js"
import { Portal } from "../services/Portal.js"
import { CliFailure, existingStoreOf, printJson, storeOf, withServices } from "./Store.js"

export interface CreateOptions extends Globals {
  readonly name: string
  readonly profile: "observer" | "assistant" | "full"
  readonly user: string | undefined
  readonly scope: string | undefined
  readonly backlog: boolean
  readonly allowElicitation: boolean
}

export const connectionCreate = (o: CreateOptions) =>
  Effect.gen(function*() {
    const store = yield* storeOf(o)
    const m = yield* withServices(store,
      Effect.flatMap(Auth, (auth) =>
        auth.createConnection({
          name: o.name,
          profile: o.profile,
          user: o.user,
          backlog: o.backlog,
          allowElicitation: o.allowElicitation,
          scope: (o.scope ?? "").split(",").map((x) => x.trim()).filter((x) => x.length > 0)
        })))
    yield* printJson({ connection_id: m.connection_id, name: m.name, profile: m.profile, user_id: m.user_id, bearer: m.bearer })
  })

/** `last_seen_at` as people read it: "never", "just now", "5 min ago", "3 h ago", "2 d ago". */
const ago = (iso: string | null, now: number) => {
  if (iso === null) return "never"
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000))
  if (s < 60) return "just now"
  if (s < 3600) return `${Math.floor(s / 60)} min ago`
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`
  return `${Math.floor(s / 86_400)} d ago`
}

/** Rows as aligned columns (the last one unpadded). */
const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
  return [header, ...rows].map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  ").trimEnd())
    .join("\n")
}

export const connectionList = (o: Globals & { readonly user: string | undefined; readonly json: boolean }) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const rows = yield* withServices(
      store,
      Effect.gen(function*() {
        const auth = yield* Auth
        const portal = yield* Portal
        const connections = yield* auth.list(o.user)
        // the row each user's portal acts as: a connection nobody holds a bearer for, labelled as what it is
        const portalIds = new Set<string>()
        for (const userId of new Set(connections.map((c) => c.user_id))) {
          Option.map(yield* portal.connectionOf(userId), (id) => portalIds.add(id))
        }
        return connections.map((c) => (portalIds.has(c.connection_id) ? { ...c, profile: "portal" } : c))
      }))
    if (o.json) return yield* printJson(rows)
    if (rows.length === 0) return yield* Console.log("no connections yet (sophia connection create --name <agent> --profile <p>)")
    const now = Date.now()
    yield* Console.log(table(
      ["NAME", "PROFILE", "ID", "USER", "SCOPE", "LAST SEEN", "STATUS"],
      rows.map((c) => [
        c.name,
        c.profile,
        c.connection_short,
        c.user_name,
        c.entity_scope.length === 0 ? "all" : c.entity_scope.join(","),
        ago(c.last_seen_at, now),
        c.revoked_at === null ? "live" : `revoked ${ago(c.revoked_at, now)}`
      ])
    ))
  })

export const connectionRevoke = (o: Globals & { readonly user: string | undefined; readonly selector: string }) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, Effect.flatMap(Auth, (auth) => auth.revoke(o.selector, o.user))).pipe(Effect.flatMap(printJson)))

export const connectionRename = (
  o: Globals & { readonly user: string | undefined; readonly selector: string; readonly newName: string }
) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, Effect.flatMap(Auth, (auth) => auth.rename(o.selector, o.newName, o.user))).pipe(
      Effect.flatMap(printJson)
    ))

export const ledgerVerify = (o: Globals) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const report = yield* withServices(store, Effect.flatMap(Ledger, (ledger) => ledger.verify()))
    yield* printJson(report)
    if (!report.ok) {
      const b = report.first_break!
      return yield* new CliFailure({ message: `ledger broken: ${b.work_id} seq ${b.seq}: ${b.reason}` })
    }
  })

export const approvalsList = (o: Globals & { readonly all: boolean }) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, Effect.flatMap(Approvals, (a) => a.list({ all: o.all }))).pipe(Effect.flatMap(printJson)))

export const approvalsDecide = (decision: "approved" | "denied") => (o: Globals & { readonly approvalId: string }) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    withServices(store, Effect.flatMap(Approvals, (a) => a.decide(o.approvalId, decision))).pipe(
      Effect.flatMap(printJson)
    ))

export const backup = (o: Globals & { readonly out: string }) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    if ("url" in store) {
      return yield* new CliFailure({ message: "backup copies a SQLite file; for Postgres use pg_dump" })
    }
    yield* printJson(yield* backupSqlite(store.filename, o.out))
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
