import * as net from "node:net"
import { defineConfig, type ViteUserConfig } from "vitest/config"

/**
 * One suite, two stores (as @effect/sql's cluster storage tests run one suite per dialect): every test
 * runs on SQLite; the service suite below runs a second time on Postgres, each test in a fresh schema
 * (`TestStore`, src/layers/Sql.ts), wherever Postgres answers. On CI (`CI=1`, or `SOPHIA_REQUIRE_POSTGRES=1`
 * as .ci/run sets) an unreachable Postgres fails the run instead of skipping it.
 */
const PG_URL = process.env.SOPHIA_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const required = process.env.CI === "1" || process.env.CI === "true" || process.env.SOPHIA_REQUIRE_POSTGRES === "1"

/** The service tests: everything that reaches the store through `SophiaTest` / `TestStore`. */
const SERVICE_SUITE = [
  "test/Approvals.test.ts",
  "test/ApprovalStatus.test.ts",
  "test/Auth.test.ts",
  "test/ContextBudget.test.ts",
  "test/Coordination.test.ts",
  "test/DenseSearch.test.ts",
  "test/Dispatch.test.ts",
  "test/Hooks.test.ts",
  "test/Inbox.test.ts",
  "test/Knowledge.test.ts",
  "test/Leases.test.ts",
  "test/LeaseWaits.test.ts",
  "test/Ledger.test.ts",
  "test/LedgerContract.test.ts",
  "test/LedgerProperties.test.ts",
  "test/Migrations.test.ts",
  "test/NamedStatements.test.ts",
  "test/Nearest.test.ts",
  "test/Notifications.test.ts",
  "test/Observed.test.ts",
  "test/Orient.test.ts",
  "test/Orphans.test.ts",
  "test/Panorama.test.ts",
  "test/PollLimits.test.ts",
  "test/PollRevocation.test.ts",
  "test/Projection.test.ts",
  "test/Search.test.ts",
  "test/Statements.test.ts",
  "test/StrictArguments.test.ts",
  "test/Waits.test.ts",
  "test/postgres/**/*.test.ts"
]

const reachable = (url: string) =>
  new Promise<boolean>((resolve) => {
    const u = new URL(url)
    const socket = net.connect({ host: u.hostname, port: Number(u.port || 5432) })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(2000, () => done(false))
    socket.once("connect", () => done(true))
    socket.once("error", () => done(false))
  })

export default defineConfig(async (): Promise<ViteUserConfig> => {
  const pg = await reachable(PG_URL)
  if (!pg && required) throw new Error(`Postgres is required here (CI) but does not answer at ${PG_URL}`)
  if (!pg) process.stderr.write(`vitest: Postgres does not answer at ${PG_URL}; the Postgres run is skipped\n`)
  const common = {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks" as const
  }
  return {
    test: {
      // the default reporter for people, plus the plain `N passed, N failed` line CI reads
      reporters: ["./test/support/SummaryReporter.ts"],
      // the CLI and package tests run the compiled dist/: build it when src/ changed
      globalSetup: ["./test/support/BuildSetup.ts"],
      ...common,
      projects: [
        // the Postgres-only tests (several daemons on one database) need Postgres: they run in the pg project
        { extends: true as const, test: { name: "sqlite", include: ["test/**/*.test.ts"], exclude: ["test/postgres/**", "**/node_modules/**"] } },
        ...(pg
          ? [{
            extends: true as const,
            test: {
              name: "postgres",
              include: SERVICE_SUITE,
              env: { SOPHIA_TEST_DATABASE_URL: PG_URL, SOPHIA_TEST_POSTGRES_URL: PG_URL }
            }
          }]
          : [])
      ]
    }
  }
})
