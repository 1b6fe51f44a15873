import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { spanned } from "./Spans.js"
import { makeStatements } from "./store/Statements.js"

/** One running daemon on this database: where it listens, and the id its `/healthz` answers with. */
export interface DaemonAddress {
  readonly instance_id: string
  readonly base_url: string
  readonly pid: number
  readonly started_at: string
}

const decodeAddresses = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  instance_id: Schema.String,
  base_url: Schema.String,
  pid: Schema.Number,
  started_at: Schema.String
})))

/**
 * Where the daemons serving this database listen (table `daemon_addresses`). `sophia serve` records its
 * address once it listens and removes it when it stops; commands that print a daemon URL (`sophia
 * portal`) read them, newest first, and keep the first whose `/healthz` answers with its instance id — a
 * killed daemon's row stays until then, harmless.
 */
export class Daemons extends Effect.Service<Daemons>()("sophia/Daemons", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named } = yield* makeStatements
    const insert = named("Daemons.record", (p: { id: string; url: string; pid: number; at: string }) =>
      sql`INSERT INTO daemon_addresses (instance_id, base_url, pid, started_at) VALUES (${p.id}, ${p.url}, ${p.pid}, ${p.at})`)
    const remove = named("Daemons.remove", (p: { id: string }) => sql`DELETE FROM daemon_addresses WHERE instance_id = ${p.id}`)
    const rows = named("Daemons.list", () =>
      sql`SELECT instance_id, base_url, pid, started_at FROM daemon_addresses ORDER BY started_at DESC, instance_id`)

    /**
     * This process's instance id: the one `/healthz` answers with (fixed for the life of the process). Made
     * when first asked: a command that never records or delivers spares loading node:crypto.
     */
    let id: string | undefined
    const instanceId = (): string => id ??= randomUUID()

    /** Record where this daemon listens, for as long as the scope lives (a clean stop removes the row). */
    const record = spanned("Daemons.record", (baseUrl: string) =>
      Effect.acquireRelease(
        Effect.flatMap(Clock.currentTimeMillis, (ms) =>
          insert({ id: instanceId(), url: baseUrl, pid: process.pid, at: new Date(ms).toISOString() })).pipe(Effect.orDie, Effect.asVoid),
        () => Effect.ignore(remove({ id: instanceId() }))
      ))

    /** Every recorded daemon, newest first (some may be dead: ask each its `/healthz`). */
    const addresses = spanned("Daemons.addresses", (): Effect.Effect<ReadonlyArray<DaemonAddress>> =>
      Effect.flatMap(rows({}), decodeAddresses).pipe(Effect.orDie))

    return { instanceId, record, addresses } as const
  })
}) {}
