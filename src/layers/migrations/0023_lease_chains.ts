import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Leases with fewer writes (issue 30, the acquire + release benchmark):
 *
 * - `lease_prefixes` goes. The holds below a glob's base are found by a range of `lease_holds_base` instead:
 *   the bases that start with `<base>/` are exactly those in [`<base>/`, `<base>0`) compared byte by byte
 *   ('/' is 0x2F, '0' 0x30) — SQLite's BINARY collation, and on Postgres the column's collation set to "C"
 *   here (whatever the database's default), which rebuilds the index with it. A grant no longer writes a row
 *   per segment-prefix of each base, nor an end deletes them.
 * - A lease's holds end with it, in the statement that ends it: a trigger deletes them when a lease's status
 *   leaves 'active' (released, expired, taken over), so no end can leave holds behind and none pays a second
 *   statement for them.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP TABLE lease_prefixes`
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.gen(function*() {
        yield* sql`ALTER TABLE lease_holds ALTER COLUMN base TYPE TEXT COLLATE "C"`
        yield* sql.unsafe(`CREATE FUNCTION lease_holds_end() RETURNS trigger LANGUAGE plpgsql AS $body$
          BEGIN
            DELETE FROM lease_holds WHERE lease_id = NEW.id;
            RETURN NULL;
          END
        $body$`)
        yield* sql`CREATE TRIGGER lease_holds_end AFTER UPDATE OF status ON leases FOR EACH ROW
          WHEN (OLD.status = 'active' AND NEW.status <> 'active') EXECUTE FUNCTION lease_holds_end()`
      }),
    orElse: () =>
      sql`CREATE TRIGGER lease_holds_end AFTER UPDATE OF status ON leases
        WHEN OLD.status = 'active' AND NEW.status <> 'active'
        BEGIN
          DELETE FROM lease_holds WHERE lease_id = NEW.id;
        END`
  })
})
