import { Migrator, SqlClient } from "@effect/sql"
import { Effect } from "effect"
import auth from "./migrations/0001_auth.js"
import coordination from "./migrations/0002_coordination.js"
import ledger from "./migrations/0003_ledger.js"
import waits from "./migrations/0004_waits.js"
import knowledge from "./migrations/0005_knowledge.js"
import approvals from "./migrations/0006_approvals.js"
import search from "./migrations/0007_search.js"
import portal from "./migrations/0008_portal.js"
import readsByPosition from "./migrations/0009_reads_by_position.js"
import postsSearchBatched from "./migrations/0010_posts_search_batched.js"
import knowledgeSearchBatched from "./migrations/0011_knowledge_search_batched.js"
import daemonAddresses from "./migrations/0012_daemon_addresses.js"
import inboxStart from "./migrations/0013_inbox_start.js"
import connectionElicitation from "./migrations/0014_connection_elicitation.js"
import leases from "./migrations/0015_leases.js"
import hooksReceipts from "./migrations/0017_hooks_receipts.js"
import leaseHolders from "./migrations/0018_lease_holders.js"
import notifications from "./migrations/0019_notifications.js"
import approveLinksSilences from "./migrations/0020_approve_links_silences.js"
import leaseChains from "./migrations/0023_lease_chains.js"
import embeddings from "./migrations/0024_embeddings.js"
import knowledgeByTime from "./migrations/0025_knowledge_by_time.js"
import postsDecisions from "./migrations/0026_posts_decisions.js"

/**
 * Every schema change, in order, as a static record (no file-system loader: the daemon runs from
 * anywhere, bundled or not). Add a file under migrations/ and one line here; never edit a landed one.
 */
export const migrations = {
  "0001_auth": auth,
  "0002_coordination": coordination,
  "0003_ledger": ledger,
  "0004_waits": waits,
  "0005_knowledge": knowledge,
  "0006_approvals": approvals,
  "0007_search": search,
  "0008_portal": portal,
  "0009_reads_by_position": readsByPosition,
  "0010_posts_search_batched": postsSearchBatched,
  "0011_knowledge_search_batched": knowledgeSearchBatched,
  "0012_daemon_addresses": daemonAddresses,
  "0013_inbox_start": inboxStart,
  "0014_connection_elicitation": connectionElicitation,
  "0015_leases": leases,
  "0017_hooks_receipts": hooksReceipts,
  "0018_lease_holders": leaseHolders,
  "0019_notifications": notifications,
  "0020_approve_links_silences": approveLinksSilences,
  "0023_lease_chains": leaseChains,
  "0024_embeddings": embeddings,
  "0025_knowledge_by_time": knowledgeByTime,
  "0026_posts_decisions": postsDecisions
}

const migrate = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "sophia_migrations"
})

/** The id of the newest migration above. */
export const NEWEST_MIGRATION = Math.max(...Object.keys(migrations).map((name) => Number.parseInt(name, 10)))

/**
 * Apply what is missing; returns the migrations applied, as the migrator does. A store already at the newest
 * one (every start but the first after an upgrade) is told by one read, without the migrator's write
 * transaction (on SQLite, `BEGIN IMMEDIATE` waits for a daemon's writes) — a `sophia` command's start. A
 * missing table (a new store) or an older id goes to the migrator, which decides under its lock.
 */
export const runMigrations = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const newest = yield* sql<{ readonly newest: number | string | null }>`SELECT MAX(migration_id) AS newest FROM sophia_migrations`.pipe(
    Effect.map((rows) => Number(rows[0]?.newest ?? 0)),
    Effect.orElseSucceed(() => 0)
  )
  if (newest < NEWEST_MIGRATION) return yield* migrate
  yield* Effect.logDebug("Migrations current").pipe(Effect.annotateLogs("latest_migration_id", String(newest)))
  return []
})

/** The key of the advisory lock migrations run under (any fixed 64-bit number; "sophia" in ASCII). */
const MIGRATION_LOCK = 0x736f70686961

/**
 * `runMigrations`, run once however many daemons start together. On Postgres a session-level advisory
 * lock, held on one reserved connection while the migrator runs on others, serializes them: the first
 * applies what is missing, the others then find nothing to do. (The migrator's own `LOCK TABLE` cannot
 * do it alone: two daemons on an empty database both try to create its table; and the migrations
 * cannot all share one transaction, since the migrator probes for its table with a statement that fails.)
 * The lock ends with the session, so a daemon that dies mid-migration frees it. SQLite needs nothing:
 * `BEGIN IMMEDIATE` already serializes processes on one file.
 */
export const runMigrationsOnce = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.onDialectOrElse({
    pg: () =>
      Effect.scoped(Effect.gen(function*() {
        const lock = yield* sql.reserve
        yield* Effect.acquireRelease(
          lock.executeRaw(`SELECT pg_advisory_lock(${MIGRATION_LOCK})`, []),
          () => Effect.ignore(lock.executeRaw(`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`, []))
        )
        return yield* runMigrations
      })),
    orElse: () => runMigrations
  })
})
