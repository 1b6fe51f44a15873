import { Migrator } from "@effect/sql"
import auth from "./migrations/0001_auth.js"
import coordination from "./migrations/0002_coordination.js"
import ledger from "./migrations/0003_ledger.js"
import waits from "./migrations/0004_waits.js"
import knowledge from "./migrations/0005_knowledge.js"
import approvals from "./migrations/0006_approvals.js"
import search from "./migrations/0007_search.js"
import portal from "./migrations/0008_portal.js"

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
  "0008_portal": portal
}

export const runMigrations = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "sophia_migrations"
})
