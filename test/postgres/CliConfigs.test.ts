/**
 * On Postgres the first-start banner's stdio entry carries the database URL in `SOPHIA_DATABASE_URL` (not
 * as `--db`), and pasted as printed it starts a stdio server on the same graph. Runs in the vitest
 * `postgres` project only.
 */
import { assert, describe, it } from "@effect/vitest"
import { randomUUID } from "node:crypto"
import { orientThrough, stdioEntry } from "../support/Banner.js"
import { sophia } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { admin, PG_BASE } from "../support/PgAdmin.js"

describe("the banner on Postgres", { timeout: 180_000 }, () => {
  it("its stdio entry passes the URL in SOPHIA_DATABASE_URL and works when pasted; sophia portal finds the daemon", async () => {
    const name = `sophia_cfg_${randomUUID().replaceAll("-", "").slice(0, 16)}`
    const url = Object.assign(new URL(PG_BASE), { pathname: `/${name}` }).toString()
    await admin(`CREATE DATABASE ${name}`)
    try {
      const daemon = await startDaemon("/nonexistent/ignored.db", { SOPHIA_DATABASE_URL: url })
      try {
        const entry = stdioEntry(daemon.stdout())
        assert.deepStrictEqual(entry.args.slice(1), ["stdio"], "no --db on Postgres")
        assert.strictEqual(entry.env.SOPHIA_DATABASE_URL, url)
        assert.isTrue(entry.command.startsWith("/") && entry.args[0].startsWith("/"), "absolute node and bin")
        const orient = await orientThrough(entry)
        assert.strictEqual(orient.profile, "full")
        const link = sophia(["portal", "--database-url", url]).stdout.trim().split("\n").at(-1)!
        assert.include(link, `${daemon.baseUrl}/portal/login?token=`)
      } finally {
        await daemon.kill()
      }
    } finally {
      await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    }
  })
})
