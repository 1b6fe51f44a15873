import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { ancestorKeys } from "../../domain/LeaseGlobs.js"
import { LeaseMode } from "../../domain/Leases.js"
import { DbInt } from "../../domain/Time.js"
import { makeStatements } from "../store/Statements.js"

/**
 * The statements of Leases over its own tables (`leases`, `lease_holds`, `lease_slots`, `lease_takeovers`; the
 * layout is the migrations', 0015_leases.ts and 0023_lease_chains.ts), each named, with the rows they return
 * decoded. A module of the Leases service: it returns effects, and only the service's own modules call them.
 */

/** Most values a shaped statement binds through its compiled text (a lease's holds, a chain's bases). */
const SHAPED_MAX = 1024

/** An active hold as a conflict check reads it. */
export const HoldRow = Schema.Struct({
  lease_id: Schema.String,
  resource: Schema.String,
  connection_id: Schema.String,
  mode: LeaseMode,
  expires_ms: DbInt
})
export type HoldRow = typeof HoldRow.Type
const decodeHolds = Schema.decodeUnknown(Schema.Array(HoldRow))

/** A lease as listed (`leases`, orient, the portal). */
export const LeaseDbRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  connection_id: Schema.String,
  project: Schema.String,
  mode: LeaseMode,
  resources: Schema.parseJson(Schema.Array(Schema.String)),
  reason: Schema.String,
  work_id: Schema.NullOr(Schema.String),
  ttl_s: DbInt,
  created_at: Schema.String,
  expires_at: Schema.String,
  expires_ms: DbInt,
  status: Schema.String
})
export type LeaseDbRow = typeof LeaseDbRow.Type
const decodeLeases = Schema.decodeUnknown(Schema.Array(LeaseDbRow))

/** A lease as an end returns it: what its `LeaseChanged` says. */
export const EndedRow = LeaseDbRow.pipe(Schema.pick("id", "user_id", "connection_id", "project", "resources"))
export type EndedRow = typeof EndedRow.Type
const decodeEnded = Schema.decodeUnknown(Schema.Array(EndedRow))
const ENDED_COLUMNS = "id, user_id, connection_id, project, resources"
const LEASE_COLUMNS = "id, user_id, connection_id, project, mode, resources, reason, work_id, ttl_s, created_at, expires_at, expires_ms, status"

const TakeoverRow = Schema.Struct({
  lease_id: Schema.String,
  previous_lease_id: Schema.String,
  previous_connection_id: Schema.String,
  reason: Schema.Literal("revoked", "silent"),
  since: Schema.String
})
const decodeTakeovers = Schema.decodeUnknown(Schema.Array(TakeoverRow))
const decodeCapacity = Schema.decodeUnknown(Schema.Array(Schema.Struct({ capacity: DbInt })))
const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))

export type HoldInsert = {
  readonly lease_id: string
  readonly user_id: string
  readonly project: string
  readonly kind: "path" | "slot"
  readonly resource: string
  readonly base: string
  readonly connection_id: string
  readonly mode: string
  readonly expires_ms: number
}
/**
 * How a `LeaseChanged` is made here: from rows the statements decoded and values this module computed, so
 * their types already hold and the event's schema is not checked again at run time (~6 µs a construction,
 * two per acquire + release).
 */
export const NO_REVALIDATION = { disableValidation: true } as const

type Infra = { readonly _tag: "SqlError" } | { readonly _tag: "ParseError" }
const isInfra = (e: unknown): boolean =>
  typeof e === "object" && e !== null && "_tag" in e && (e._tag === "SqlError" || e._tag === "ParseError")
/** Infrastructure failures (SQL, a row that does not decode) become defects here, at the service's edge. */
export const dieOnInfra = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, Exclude<E, Infra>, R> =>
  Effect.catchIf(effect, (e): e is Extract<E, Infra> => isInfra(e), Effect.die) as Effect.Effect<A, Exclude<E, Infra>, R>

export const makeLeaseStore = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, shaped } = yield* makeStatements
  const [leaseColumns, endedColumns] = [sql.literal(LEASE_COLUMNS), sql.literal(ENDED_COLUMNS)]

  // ---- what a conflict check reads ----------------------------------------------------------------
  // the holds on a glob's chain, in one statement: those whose base is an ancestor of (or equal to) the
  // glob's base, and those below it — the bases in [`<base>/`, `<base>0`), byte by byte (migration 0023)
  const holdsOnChain = shaped(
    "Leases.holdsOnChain",
    SHAPED_MAX,
    (p: { userId: string; project: string; bases: ReadonlyArray<string>; below: string; above: string }) =>
      sql`SELECT lease_id, resource, connection_id, mode, expires_ms FROM lease_holds
        WHERE user_id = ${p.userId} AND project = ${p.project} AND kind = 'path' AND ${sql.in("base", p.bases)}
      UNION
      SELECT lease_id, resource, connection_id, mode, expires_ms FROM lease_holds
        WHERE user_id = ${p.userId} AND project = ${p.project} AND kind = 'path' AND base >= ${p.below} AND base < ${p.above}`
  )
  // a glob wild from its first segment (base ""): every path hold of the project is on its chain
  const pathHolds = named("Leases.pathHolds", (p: { userId: string; project: string }) =>
    sql`SELECT lease_id, resource, connection_id, mode, expires_ms FROM lease_holds
      WHERE user_id = ${p.userId} AND project = ${p.project} AND kind = 'path'`)
  const holdsOfSlot = named("Leases.holdsOfSlot", (p: { userId: string; project: string; name: string }) =>
    sql`SELECT lease_id, resource, connection_id, mode, expires_ms FROM lease_holds
      WHERE user_id = ${p.userId} AND project = ${p.project} AND kind = 'slot' AND base = ${p.name}`)
  const slotCapacity = named("Leases.slotCapacity", (p: { userId: string; project: string; name: string }) =>
    sql`SELECT capacity FROM lease_slots WHERE user_id = ${p.userId} AND project = ${p.project} AND name = ${p.name}`)

  // ---- a grant ------------------------------------------------------------------------------------
  const insertLease = named("Leases.insert", (p: {
    id: string
    userId: string
    connectionId: string
    project: string
    mode: string
    resources: string
    reason: string
    workId: string | null
    ttlS: number
    createdAt: string
    expiresAt: string
    expiresMs: number
  }) =>
    sql`INSERT INTO leases (id, user_id, connection_id, project, mode, resources, reason, work_id, ttl_s, created_at,
        expires_at, expires_ms, status)
      VALUES (${p.id}, ${p.userId}, ${p.connectionId}, ${p.project}, ${p.mode}, ${p.resources}, ${p.reason}, ${p.workId},
        ${p.ttlS}, ${p.createdAt}, ${p.expiresAt}, ${p.expiresMs}, 'active')`)
  const insertHolds = shaped("Leases.insertHolds", SHAPED_MAX, (p: { rows: ReadonlyArray<HoldInsert> }) =>
    sql`INSERT INTO lease_holds ${sql.insert(p.rows as any)}`)
  const insertSlot = named("Leases.insertSlot", (p: { userId: string; project: string; name: string; capacity: number; at: string }) =>
    sql`INSERT INTO lease_slots (user_id, project, name, capacity, created_at)
      VALUES (${p.userId}, ${p.project}, ${p.name}, ${p.capacity}, ${p.at}) ON CONFLICT DO NOTHING`)
  const insertTakeover = named("Leases.insertTakeover", (p: {
    leaseId: string
    previous: string
    previousConnection: string
    reason: string
    since: string
    at: string
  }) =>
    sql`INSERT INTO lease_takeovers (lease_id, previous_lease_id, previous_connection_id, reason, since, at)
      VALUES (${p.leaseId}, ${p.previous}, ${p.previousConnection}, ${p.reason}, ${p.since}, ${p.at})`)

  // ---- ends and renewals ----------------------------------------------------------------------------
  const leasesByIds = shaped("Leases.byIds", SHAPED_MAX, (p: { ids: ReadonlyArray<string> }) =>
    sql`SELECT ${leaseColumns} FROM leases WHERE ${sql.in("id", p.ids)}`)
  const findLease = named("Leases.find", (p: { userId: string; id: string }) =>
    sql`SELECT ${leaseColumns} FROM leases WHERE id = ${p.id} AND user_id = ${p.userId}`)
  /** End an active lease (conditional: zero rows when it had ended already); its holds go with it (so do every end's: 0023's trigger). */
  const endActive = named("Leases.end", (p: { id: string; status: string; at: string; by: string | null }) =>
    sql`UPDATE leases SET status = ${p.status}, ended_at = ${p.at}, ended_by = ${p.by}
      WHERE id = ${p.id} AND status = 'active' RETURNING ${endedColumns}`)
  /** The holder ends its own active, unexpired lease (zero rows: not so — the caller reads why). */
  const endOwn = named("Leases.endOwn", (p: { id: string; userId: string; connectionId: string; at: string; now: number }) =>
    sql`UPDATE leases SET status = 'released', ended_at = ${p.at}, ended_by = ${p.connectionId}
      WHERE id = ${p.id} AND user_id = ${p.userId} AND connection_id = ${p.connectionId} AND status = 'active'
        AND expires_ms > ${p.now}
      RETURNING ${endedColumns}`)
  const expireDue = named("Leases.expire", (p: { id: string; at: string; now: number }) =>
    sql`UPDATE leases SET status = 'expired', ended_at = ${p.at}
      WHERE id = ${p.id} AND status = 'active' AND expires_ms <= ${p.now} RETURNING ${endedColumns}`)
  const renewLease = named("Leases.renew", (p: { id: string; expiresAt: string; expiresMs: number; ttlS: number; now: number }) =>
    sql`UPDATE leases SET expires_at = ${p.expiresAt}, expires_ms = ${p.expiresMs}, ttl_s = ${p.ttlS}
      WHERE id = ${p.id} AND status = 'active' AND expires_ms > ${p.now} RETURNING id`)
  const renewHolds = named("Leases.renewHolds", (p: { id: string; expiresMs: number }) =>
    sql`UPDATE lease_holds SET expires_ms = ${p.expiresMs} WHERE lease_id = ${p.id}`)
  const dueLeases = named("Leases.due", (p: { now: number }) =>
    sql`SELECT id FROM leases WHERE status = 'active' AND expires_ms <= ${p.now} ORDER BY expires_ms`)

  // ---- lists ----------------------------------------------------------------------------------------
  const activeOfUser = named("Leases.activeOfUser", (p: { userId: string; now: number }) =>
    sql`SELECT ${leaseColumns} FROM leases WHERE user_id = ${p.userId} AND status = 'active' AND expires_ms > ${p.now}
      ORDER BY created_at, id`)
  const activeOfConnection = named("Leases.activeOfConnection", (p: { userId: string; connectionId: string; now: number }) =>
    sql`SELECT ${leaseColumns} FROM leases
      WHERE user_id = ${p.userId} AND connection_id = ${p.connectionId} AND status = 'active' AND expires_ms > ${p.now}
      ORDER BY created_at, id`)
  const activeOfProject = named("Leases.activeOfProject", (p: { userId: string; project: string; now: number }) =>
    sql`SELECT ${leaseColumns} FROM leases
      WHERE user_id = ${p.userId} AND project = ${p.project} AND status = 'active' AND expires_ms > ${p.now}
      ORDER BY created_at, id`)
  const activeOfWork = named("Leases.activeOfWork", (p: { userId: string; workId: string; now: number }) =>
    sql`SELECT ${leaseColumns} FROM leases
      WHERE user_id = ${p.userId} AND work_id = ${p.workId} AND status = 'active' AND expires_ms > ${p.now}
      ORDER BY created_at, id`)
  const takeoversOf = shaped("Leases.takeoversOf", SHAPED_MAX, (p: { ids: ReadonlyArray<string> }) =>
    sql`SELECT lease_id, previous_lease_id, previous_connection_id, reason, since FROM lease_takeovers
      WHERE ${sql.in("lease_id", p.ids)} ORDER BY at`)
  const countActive = named("Leases.countActive", (p: { userId: string; now: number }) =>
    sql`SELECT COUNT(*) AS n FROM leases WHERE user_id = ${p.userId} AND status = 'active' AND expires_ms > ${p.now}`)

  const die = dieOnInfra
  return {
    /** The path holds on the chain of `base` (a glob's base key): its ancestors, itself, and every base below it. */
    holdsOnChain: (userId: string, project: string, base: string) =>
      die(Effect.flatMap(
        base === ""
          ? pathHolds({ userId, project })
          : holdsOnChain({ userId, project, bases: ancestorKeys(base), below: `${base}/`, above: `${base}0` }),
        decodeHolds
      )),
    holdsOfSlot: (userId: string, project: string, name: string) =>
      die(Effect.flatMap(holdsOfSlot({ userId, project, name }), decodeHolds)),
    slotCapacity: (userId: string, project: string, name: string) =>
      die(Effect.map(Effect.flatMap(slotCapacity({ userId, project, name }), decodeCapacity), (rows) => rows[0]?.capacity)),
    insertLease: (p: Parameters<typeof insertLease>[0]) => die(insertLease(p)),
    insertHolds: (rows: ReadonlyArray<HoldInsert>) => die(insertHolds({ rows })),
    insertSlot: (p: Parameters<typeof insertSlot>[0]) => die(insertSlot(p)),
    insertTakeover: (p: Parameters<typeof insertTakeover>[0]) => die(insertTakeover(p)),
    byIds: (ids: ReadonlyArray<string>) =>
      ids.length === 0 ? Effect.succeed([]) : die(Effect.flatMap(leasesByIds({ ids }), decodeLeases)),
    find: (userId: string, id: string) => die(Effect.map(Effect.flatMap(findLease({ userId, id }), decodeLeases), (rows) => rows[0])),
    end: (p: Parameters<typeof endActive>[0]) => die(Effect.flatMap(endActive(p), decodeEnded)),
    endOwn: (p: Parameters<typeof endOwn>[0]) => die(Effect.flatMap(endOwn(p), decodeEnded)),
    expire: (p: Parameters<typeof expireDue>[0]) => die(Effect.flatMap(expireDue(p), decodeEnded)),
    renew: (p: Parameters<typeof renewLease>[0]) =>
      die(Effect.flatMap(renewLease(p), (rows) => rows.length > 0 ? Effect.as(renewHolds(p), true) : Effect.succeed(false))),
    due: (now: number) => die(Effect.map(Effect.flatMap(dueLeases({ now }), decodeIds), (rows) => rows.map((r) => r.id))),
    activeOfUser: (userId: string, now: number) => die(Effect.flatMap(activeOfUser({ userId, now }), decodeLeases)),
    activeOfConnection: (userId: string, connectionId: string, now: number) =>
      die(Effect.flatMap(activeOfConnection({ userId, connectionId, now }), decodeLeases)),
    activeOfProject: (userId: string, project: string, now: number) =>
      die(Effect.flatMap(activeOfProject({ userId, project, now }), decodeLeases)),
    activeOfWork: (userId: string, workId: string, now: number) => die(Effect.flatMap(activeOfWork({ userId, workId, now }), decodeLeases)),
    takeoversOf: (ids: ReadonlyArray<string>) =>
      ids.length === 0 ? Effect.succeed([]) : die(Effect.flatMap(takeoversOf({ ids }), decodeTakeovers)),
    countActive: (userId: string, now: number) =>
      die(Effect.map(countActive({ userId, now }), (rows) => Number((rows[0] as { n: unknown }).n)))
  } as const
})

export type LeaseStore = Effect.Effect.Success<typeof makeLeaseStore>
