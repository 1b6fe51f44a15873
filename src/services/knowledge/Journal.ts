import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { Caller } from "../../domain/Auth.js"
import { NotFound, ValidationError } from "../../domain/Errors.js"
import type { MutationChange } from "../../domain/Knowledge.js"
import { MutationChange as MutationChangeSchema } from "../../domain/Knowledge.js"
import { nowIso } from "../../domain/Time.js"
import type { FullText } from "../store/FullText.js"
import { family, limitTo, makeStatements } from "../store/Statements.js"

/** A new row id of Knowledge (`doc-…`, `fact-…`, `ent-…`, `mut-…`, `imp-…`). */
export const newId = (prefix: string) => `${prefix}-${randomUUID()}`

const decodeChanges = Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(MutationChangeSchema)))

const MutationRow = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  connection_id: Schema.String,
  tool: Schema.String,
  changes: Schema.String,
  reverts: Schema.NullOr(Schema.String),
  reverted_by: Schema.NullOr(Schema.String),
  created_at: Schema.String
})
const decodeMutations = Schema.decodeUnknown(Schema.Array(MutationRow))
const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))

const TABLE = { document: "documents", fact: "facts", entity: "entities" } as const

/**
 * The mutation journal (`mutations`): every Knowledge write records the rows it brought into or out of
 * existence, in its own transaction; `revert` writes the compensating change of one entry. Rows are never
 * physically removed: `deleted_at` marks them gone, so a revert of a revert restores them exactly.
 */
export const makeJournal = (fullText: FullText) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named } = yield* makeStatements

    const insert = named("Knowledge.journal", (p: {
      id: string
      userId: string
      connectionId: string
      tool: string
      changes: string
      reverts: string | null
      createdAt: string
    }) =>
      sql`INSERT INTO mutations (id, user_id, connection_id, tool, changes, reverts, created_at)
        VALUES (${p.id}, ${p.userId}, ${p.connectionId}, ${p.tool}, ${p.changes}, ${p.reverts}, ${p.createdAt})`)
    const byId = named("Knowledge.mutation", (p: { id: string; userId: string }) =>
      sql`SELECT * FROM mutations WHERE id = ${p.id} AND user_id = ${p.userId}`)
    const newest = family((limit: number) =>
      named("Knowledge.mutations", (p: { userId: string }) =>
        sql`SELECT * FROM mutations WHERE user_id = ${p.userId} ORDER BY created_at DESC, id ${limitTo(sql, limit)}`))
    const markReverted = named("Knowledge.markReverted", (p: { id: string; by: string }) =>
      sql`UPDATE mutations SET reverted_by = ${p.by} WHERE id = ${p.id}`)
    const reopen = named("Knowledge.reopenMutation", (p: { id: string }) => sql`UPDATE mutations SET reverted_by = NULL WHERE id = ${p.id}`)
    const remove = family((table: string) =>
      named(`Knowledge.remove.${table}`, (p: { id: string; userId: string; at: string }) =>
        sql`UPDATE ${sql(table)} SET deleted_at = ${p.at} WHERE id = ${p.id} AND user_id = ${p.userId}`))
    const restore = family((table: string) =>
      named(`Knowledge.restore.${table}`, (p: { id: string; userId: string }) =>
        sql`UPDATE ${sql(table)} SET deleted_at = NULL WHERE id = ${p.id} AND user_id = ${p.userId}`))
    const nameTaken = named("Knowledge.entityNameTaken", (p: { id: string; userId: string }) =>
      sql`SELECT e.id FROM entities e JOIN entities r ON r.id = ${p.id}
        WHERE e.user_id = ${p.userId} AND e.name = r.name AND e.deleted_at IS NULL`)

    /** Journal a write's changes (inside its transaction); the entry's id. */
    const record = (caller: Caller, tool: string, changes: ReadonlyArray<MutationChange>, reverts: string | null = null) =>
      Effect.gen(function*() {
        const id = newId("mut")
        yield* insert({
          id,
          userId: caller.userId,
          connectionId: caller.connectionId,
          tool,
          changes: JSON.stringify(changes),
          reverts,
          createdAt: yield* nowIso
        })
        return id
      })

    /** The caller's journal, newest first. */
    const list = (caller: Caller, limit: number) =>
      Effect.map(Effect.flatMap(newest(limit)({ userId: caller.userId }), decodeMutations), (rows) =>
        rows.map((r) => ({ ...r, changes: decodeChanges(r.changes) })))

    /**
     * Write the compensating change of a journaled mutation: rows it created go (soft-deleted; the search
     * index follows), rows it removed come back. The revert is journaled itself (and can be reverted in turn).
     */
    const revert = (caller: Caller, mutationId: string) =>
      Effect.gen(function*() {
        const row = (yield* Effect.flatMap(byId({ id: mutationId, userId: caller.userId }), decodeMutations))[0]
        if (row === undefined) return yield* new NotFound({ what: "mutation", id: mutationId })
        if (row.reverted_by !== null) {
          return yield* new ValidationError({ detail: `mutation ${mutationId} was already reverted by ${row.reverted_by}` })
        }
        const changes = decodeChanges(row.changes)
        const at = yield* nowIso
        for (const change of [...changes].reverse()) {
          const table = TABLE[change.kind]
          if (change.before === null && change.after !== null) {
            yield* remove(table)({ id: change.id, userId: caller.userId, at })
          } else if (change.before !== null && change.after === null) {
            if (change.kind === "entity") {
              const clash = yield* Effect.flatMap(nameTaken({ id: change.id, userId: caller.userId }), decodeIds)
              if (clash.length > 0) {
                return yield* new ValidationError({ detail: `cannot restore entity ${change.id}: its name is taken by ${clash[0].id}` })
              }
            }
            yield* restore(table)({ id: change.id, userId: caller.userId })
          }
        }
        const idsOf = (kind: MutationChange["kind"]) => changes.filter((c) => c.kind === kind).map((c) => c.id)
        yield* fullText.changed("documents", caller.userId, idsOf("document"))
        yield* fullText.changed("facts", caller.userId, idsOf("fact"))
        const compensating = changes.map((c) => ({ ...c, before: c.after, after: c.before }))
        const id = yield* record(caller, "sophia.revert_mutation", compensating, mutationId)
        yield* markReverted({ id: mutationId, by: id })
        // reverting a revert re-applies the original, which may then be reverted again
        if (row.reverts !== null) yield* reopen({ id: row.reverts })
        return { mutation_id: id, reverted: mutationId, changes: changes.length }
      })

    return { record, list, revert } as const
  })

export type Journal = Effect.Effect.Success<ReturnType<typeof makeJournal>>
