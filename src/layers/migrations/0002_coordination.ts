import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Coordination: posts, per-connection read state, channel counters and the archived-channel side table.
 *
 * Counters (all maintained inside the write transactions, see src/services/Coordination.ts):
 *  - post_counters(user): `last_pos` allocates the user's post position (the inbox order), `visible` =
 *    non-heartbeat posts in non-archived channels;
 *  - channel_counters(user, channel): `last_seq` allocates the gapless channel_seq, `visible` = its
 *    non-heartbeat posts;
 *  - inbox_state(user, connection): `consumed` = visible posts (non-archived channels) that are the
 *    connection's own or read by it, so unread = post_counters.visible - consumed (two key lookups);
 *    `lwm` = a position below which nothing is unread in the default view (bounds the inbox scan);
 *  - inbox_channel_state(user, connection, channel): the same per channel (+ its own low-water position).
 * `references` is a reserved word in SQL, hence the column `refs`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE posts (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    pos BIGINT NOT NULL,
    channel TEXT NOT NULL,
    channel_seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    refs TEXT NOT NULL DEFAULT '[]',
    payload TEXT,
    connection_id TEXT NOT NULL REFERENCES connections(id),
    to_selector TEXT,
    to_connection_id TEXT REFERENCES connections(id),
    based_on_seq BIGINT,
    created_at TEXT NOT NULL,
    UNIQUE (user_id, channel, channel_seq),
    UNIQUE (user_id, pos)
  )`
  yield* sql`CREATE TABLE post_counters (
    user_id TEXT PRIMARY KEY REFERENCES users(id),
    last_pos BIGINT NOT NULL,
    visible BIGINT NOT NULL
  )`
  yield* sql`CREATE TABLE channel_counters (
    user_id TEXT NOT NULL REFERENCES users(id),
    channel TEXT NOT NULL,
    last_seq BIGINT NOT NULL,
    visible BIGINT NOT NULL,
    last_post_at TEXT NOT NULL,
    PRIMARY KEY (user_id, channel)
  )`
  // absence = never archived; a row with archived_at NULL = re-opened
  yield* sql`CREATE TABLE channels (
    user_id TEXT NOT NULL REFERENCES users(id),
    id TEXT NOT NULL,
    archived_at TEXT,
    archived_by_post TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (user_id, id)
  )`
  yield* sql`CREATE TABLE reads (
    user_id TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    post_id TEXT NOT NULL REFERENCES posts(id),
    read_at TEXT NOT NULL,
    PRIMARY KEY (user_id, connection_id, post_id)
  )`
  yield* sql`CREATE TABLE inbox_state (
    user_id TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    consumed BIGINT NOT NULL,
    lwm BIGINT NOT NULL,
    PRIMARY KEY (user_id, connection_id)
  )`
  yield* sql`CREATE TABLE inbox_channel_state (
    user_id TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    consumed BIGINT NOT NULL,
    lwm_pos BIGINT NOT NULL,
    PRIMARY KEY (user_id, connection_id, channel)
  )`
  // the inbox hot paths: (user_id, pos) for the whole inbox (the UNIQUE above), this one for a channel's
  yield* sql`CREATE INDEX posts_channel_pos ON posts (user_id, channel, pos)`
  yield* sql`CREATE INDEX inbox_channel_state_channel ON inbox_channel_state (user_id, channel)`
  yield* sql`CREATE INDEX channel_counters_recent ON channel_counters (user_id, last_post_at)`
})
