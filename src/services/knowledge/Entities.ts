import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { NotFound, ValidationError } from "../../domain/Errors.js"
import type { CreateEntityInput, MutationChange } from "../../domain/Knowledge.js"
import { nowIso } from "../../domain/Time.js"
import { serialize } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"
import { newId } from "./Journal.js"

const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))

/**
 * Entities (`entities`) and the entity scope every Knowledge read applies: a connection that carries a
 * scope reads only documents and facts of those entities.
 */
export const makeEntities = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, shaped } = yield* makeStatements

  const scopeRows = shaped("Knowledge.scopeEntities", 512, (p: { userId: string; refs: ReadonlyArray<string> }) =>
    sql`SELECT id FROM entities WHERE user_id = ${p.userId}
      AND deleted_at IS NULL AND (id IN ${sql.in(p.refs)} OR name IN ${sql.in(p.refs)})`)
  const byRef = named("Knowledge.entityByRef", (p: { userId: string; ref: string }) =>
    sql`SELECT id FROM entities WHERE user_id = ${p.userId}
      AND deleted_at IS NULL AND (id = ${p.ref} OR name = ${p.ref}) ORDER BY CASE WHEN id = ${p.ref} THEN 0 ELSE 1 END`)
  const liveNamed = named("Knowledge.entityNamed", (p: { userId: string; name: string }) =>
    sql`SELECT id FROM entities WHERE user_id = ${p.userId} AND name = ${p.name} AND deleted_at IS NULL`)
  const insert = named("Knowledge.insertEntity", (p: {
    id: string
    userId: string
    name: string
    kind: string
    createdBy: string
    createdAt: string
  }) =>
    sql`INSERT INTO entities (id, user_id, name, kind, created_by, created_at)
      VALUES (${p.id}, ${p.userId}, ${p.name}, ${p.kind}, ${p.createdBy}, ${p.createdAt})`)

  /**
   * The entity ids a caller may read: undefined = everything (no scope). Scope entries are entity ids or
   * names; an entry naming nothing grants nothing.
   */
  const scopeIds = (caller: Caller) =>
    caller.entityScope.length === 0
      ? Effect.succeed(undefined)
      : Effect.map(Effect.flatMap(scopeRows({ userId: caller.userId, refs: caller.entityScope }), decodeIds), (rows) =>
        rows.map((r) => r.id))

  /** An entity reference (id or exact name) among the caller's live entities, inside its scope. */
  const resolve = (caller: Caller, ref: string | undefined) =>
    Effect.gen(function*() {
      if (ref === undefined) return null
      const rows = yield* Effect.flatMap(byRef({ userId: caller.userId, ref }), decodeIds)
      const scope = yield* scopeIds(caller)
      const id = rows[0]?.id
      if (id === undefined || (scope !== undefined && !scope.includes(id))) {
        return yield* new NotFound({ what: "entity", id: ref })
      }
      return id
    })

  /** A new entity, unless a live one of the user has its name; the journal's change with it. */
  const create = (caller: Caller, input: CreateEntityInput) =>
    Effect.gen(function*() {
      // the clash check and the insert are one decision per user: serialized (an advisory lock on Postgres,
      // store/Locking.ts), so concurrent writers get one entity and one ValidationError (entities_live_name
      // stays the backstop)
      yield* serialize(sql, `entity-names/${caller.userId}`)
      const clash = yield* Effect.flatMap(liveNamed({ userId: caller.userId, name: input.name }), decodeIds)
      if (clash.length > 0) {
        return yield* new ValidationError({ detail: `an entity named ${JSON.stringify(input.name)} already exists (${clash[0].id})` })
      }
      const id = newId("ent")
      const at = yield* nowIso
      yield* insert({ id, userId: caller.userId, name: input.name, kind: input.kind, createdBy: caller.connectionId, createdAt: at })
      const change: MutationChange = { kind: "entity", id, before: null, after: { name: input.name, kind: input.kind, created_at: at } }
      return { entity_id: id, name: input.name, kind: input.kind, change }
    })

  return { scopeIds, resolve, create } as const
})

export type Entities = Effect.Effect.Success<typeof makeEntities>
