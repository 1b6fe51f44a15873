import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The ledger: work items with one head each (moved only by a conditional UPDATE on the expected head),
 * their hash-chained events (no fork: one event per (work, seq) and per (work, parent)), the settled
 * fields and the review requests. Everything is scoped by user_id: work ids are per user.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE ledger_work (
    user_id TEXT NOT NULL,
    work_id TEXT NOT NULL,
    head TEXT NOT NULL,
    seq BIGINT NOT NULL,
    title TEXT NOT NULL,
    status TEXT NOT NULL,
    resolution TEXT,
    claimant TEXT,
    workers TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, work_id)
  )`
  yield* sql`CREATE TABLE ledger_events (
    user_id TEXT NOT NULL,
    work_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    parent TEXT,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    evidence TEXT NOT NULL,
    actor TEXT NOT NULL,
    at TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (user_id, work_id, seq),
    UNIQUE (user_id, work_id, parent)
  )`
  yield* sql`CREATE UNIQUE INDEX ledger_events_hash ON ledger_events (user_id, work_id, hash)`
  yield* sql`CREATE TABLE ledger_fields (
    user_id TEXT NOT NULL,
    work_id TEXT NOT NULL,
    field TEXT NOT NULL,
    value TEXT NOT NULL,
    evidence TEXT NOT NULL,
    set_by TEXT NOT NULL,
    at TEXT NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (user_id, work_id, field)
  )`
  yield* sql`CREATE TABLE ledger_reviews (
    request_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    work_id TEXT NOT NULL,
    artifact_uri TEXT NOT NULL,
    artifact_sha256 TEXT NOT NULL,
    reviewer TEXT,
    requested_by TEXT NOT NULL,
    requested_seq BIGINT NOT NULL,
    status TEXT NOT NULL,
    verdict_by TEXT,
    verdict_seq BIGINT
  )`
  yield* sql`CREATE INDEX ledger_reviews_work ON ledger_reviews (user_id, work_id, status)`
})
