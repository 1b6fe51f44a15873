/** The suite's Postgres as its administrator: where it is, and one statement at a time (CREATE/DROP SCHEMA or DATABASE). */
import Pg from "pg"

export const PG_BASE = process.env.SOPHIA_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test"

/** Run one statement on its own connection to `url` (default: the suite's database). */
export const admin = async (statement: string, url: string = PG_BASE): Promise<void> => {
  const c = new Pg.Client({ connectionString: url })
  await c.connect()
  try {
    await c.query(statement)
  } finally {
    await c.end()
  }
}
