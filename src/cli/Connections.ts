/**
 * `connection list` and `connection rename`: Auth (and Portal, which says which row is a user's portal),
 * nothing else (layers/Commands.ts); neither publishes an event.
 */
import { Console, Effect, Layer, Option } from "effect"
import { commandOn } from "../layers/Commands.js"
import { Auth } from "../services/Auth.js"
import { Portal } from "../services/Portal.js"
import type { Globals } from "./Store.js"
import { existingStoreOf, printJson } from "./Store.js"

const services = Portal.Default.pipe(Layer.provideMerge(Auth.Default))

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
    const rows = yield* Effect.provide(
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
      }),
      commandOn(store, services)
    )
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

export const connectionRename = (
  o: Globals & { readonly user: string | undefined; readonly selector: string; readonly newName: string }
) =>
  Effect.flatMap(existingStoreOf(o), (store) =>
    Effect.provide(Effect.flatMap(Auth, (auth) => auth.rename(o.selector, o.newName, o.user)), commandOn(store, Auth.Default)).pipe(
      Effect.flatMap(printJson)
    ))

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
