import { Migrator } from "@effect/sql"
import auth from "./migrations/0001_auth.js"

/**
 * Every schema change, in order, as a static record (no file-system loader: the daemon runs from
 * anywhere, bundled or not). Add a file under migrations/ and one line here; never edit a landed one.
 */
export const migrations = {
  "0001_auth": auth
}

export const runMigrations = Migrator.make({})({
  loader: Migrator.fromRecord(migrations),
  table: "sophia_migrations"
})
