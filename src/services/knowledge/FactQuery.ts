import { SqlClient } from "@effect/sql"
import { Effect, Schema, Struct } from "effect"
import type { Caller } from "../../domain/Auth.js"
import type { FactRow, QueryKnowledgeInput } from "../../domain/Knowledge.js"
import { FactRow as FactRowSchema, FactSource, LIMITS } from "../../domain/Knowledge.js"
import { limitTo, makeStatements } from "../store/Statements.js"
import type { Entities } from "./Entities.js"

const decodeFacts = Schema.decodeUnknown(
  Schema.Array(Schema.Struct({ id: Schema.String, ...Struct.omit(FactRowSchema.fields, "fact_id", "sources") }))
)
const decodeSources = Schema.decodeUnknown(Schema.Array(Schema.Struct({ fact_id: Schema.String, ...FactSource.fields })))

/** `sophia.query_knowledge`: facts read by subject, predicate or a substring, each with the documents it cites. */
export const makeFactQuery = (entities: Entities) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { shaped } = yield* makeStatements

    const sourcesOf = shaped("Knowledge.factSources", 512, (p: { factIds: ReadonlyArray<string> }) =>
      sql`SELECT fs.fact_id, d.id AS document_id, d.title, d.uri
        FROM fact_sources fs JOIN documents d ON d.id = fs.document_id AND d.deleted_at IS NULL
        WHERE fs.fact_id IN ${sql.in(p.factIds)} ORDER BY d.id`)
    const sourcesInScope = shaped(
      "Knowledge.factSourcesInScope",
      512,
      (p: { factIds: ReadonlyArray<string>; scope: ReadonlyArray<string> }) =>
        sql`SELECT fs.fact_id, d.id AS document_id, d.title, d.uri
        FROM fact_sources fs JOIN documents d ON d.id = fs.document_id AND d.deleted_at IS NULL
        WHERE fs.fact_id IN ${sql.in(p.factIds)} AND d.entity_id IN ${sql.in(p.scope)} ORDER BY d.id`
    )

    /** Facts by subject / predicate (case-insensitive) and/or a substring of any part, each with its sources. */
    const query = (caller: Caller, input: QueryKnowledgeInput) =>
      Effect.gen(function*() {
        const scope = yield* entities.scopeIds(caller)
        if (scope !== undefined && scope.length === 0) return { facts: [] as Array<FactRow> }
        const like = input.text !== undefined && input.text.length > 0
          ? `%${input.text.toLowerCase().replace(/[\\%_]/g, (c) => "\\" + c)}%`
          : undefined
        // the conditions present vary: a statement built per call
        const facts = yield* sql`SELECT f.id, f.subject, f.predicate,
            f.object, f.entity_id, f.origin, f.created_by, f.created_at
          FROM facts f
          WHERE f.user_id = ${caller.userId} AND f.deleted_at IS NULL
            ${input.subject !== undefined ? sql`AND lower(f.subject) = ${input.subject.toLowerCase()}` : sql``}
            ${input.predicate !== undefined ? sql`AND lower(f.predicate) = ${input.predicate.toLowerCase()}` : sql``}
            ${
          like !== undefined
            ? sql`AND (lower(f.subject) LIKE ${like} ESCAPE '\\' OR lower(f.predicate) LIKE ${like} ESCAPE '\\'
                   OR lower(f.object) LIKE ${like} ESCAPE '\\')`
            : sql``
        }
            ${scope === undefined ? sql`` : sql`AND f.entity_id IN ${sql.in(scope)}`}
          ORDER BY f.created_at DESC, f.id
          ${limitTo(sql, input.limit ?? LIMITS.queryLimitDefault)}`.pipe(Effect.flatMap(decodeFacts))
        if (facts.length === 0) return { facts: [] as Array<FactRow> }
        const factIds = facts.map((f) => f.id)
        const sources = yield* Effect.flatMap(
          scope === undefined ? sourcesOf({ factIds }) : sourcesInScope({ factIds, scope }),
          decodeSources
        )
        const byFact = new Map<string, Array<{ document_id: string; title: string; uri: string | null }>>()
        for (const s of sources) {
          const list = byFact.get(s.fact_id) ?? []
          list.push({ document_id: s.document_id, title: s.title, uri: s.uri })
          byFact.set(s.fact_id, list)
        }
        return {
          facts: facts.map(({ id, ...f }): FactRow => ({ fact_id: id, ...f, sources: byFact.get(id) ?? [] }))
        }
      })

    return { query } as const
  })
