import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Documents and facts in the order they were written, every user's: the embedding feed reads them past a
 * cursor (`created_at`, `id`) through these indexes (Knowledge.textsPast / countPast). Portable SQL.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX documents_by_time ON documents (created_at, id)`
  yield* sql`CREATE INDEX facts_by_time ON facts (created_at, id)`
})
