/**
 * A fresh Postgres database for one benchmark (bench/pg.bench.ts, search-pg, panorama), made on the server at
 * `base` (default SOPHIA_BENCH_POSTGRES_URL, else the local `test` database) and dropped afterwards.
 */
import { randomUUID } from "node:crypto"
import Pg from "pg"

export const BENCH_POSTGRES_URL = process.env.SOPHIA_BENCH_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const admin = async (base: string, q: string) => {
  const c = new Pg.Client({ connectionString: base, connectionTimeoutMillis: 2000 })
  await c.connect()
  try {
    await c.query(q)
  } finally {
    await c.end()
  }
}

/** A new database's URL, and how to drop it (forcing its connections closed). */
export const freshDatabase = async (base = BENCH_POSTGRES_URL) => {
  const name = `sophia_bench_${randomUUID().replaceAll("-", "").slice(0, 12)}`
  await admin(base, `CREATE DATABASE ${name}`)
  const u = new URL(base)
  u.pathname = `/${name}`
  return { url: u.toString(), drop: () => admin(base, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) }
}
