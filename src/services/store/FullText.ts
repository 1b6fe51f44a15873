import type { Statement } from "@effect/sql"
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Schema } from "effect"
import type { ParseError } from "effect/ParseResult"
import { DbInt } from "../../domain/Time.js"
import type { Statements } from "./Statements.js"
import { family, limitTo, makeStatements } from "./Statements.js"

/**
 * The one module that names how the two stores differ in full-text search (the other difference, locking,
 * is `Locking.ts`): the query syntax, ranking, snippets and how each index is written. Services ask it for
 * ranked matches and tell it which of their rows changed; no service writes `MATCH`, `bm25`, `ts_rank`,
 * `snippet`, `ts_headline` or an index table.
 *
 * Postgres indexes itself: each searchable table has a generated `search` tsvector under a GIN index
 * (migrations 0005, 0007), so a committed row is found at once and a deleted one is filtered by its
 * `deleted_at`. Nothing is batched there.
 *
 * SQLite: a standalone FTS5 table per kind (`documents_fts`, `facts_fts`, `posts_fts`: a copy of the text
 * plus the row's id, user and — for documents and facts — entity as unindexed columns, so ranking and
 * filtering never leave the index). Every one is written the same way, in batches after the fact, never in
 * the transaction of the write that changed the rows. Measured on a post's statements: FTS5 writes a new
 * index segment (and its structure record) at every commit that touched it, about half of a post's SQLite
 * time; a batch pays that once. Per kind and user a progress row (`<kind>_fts_progress`) says up to which
 * position the index follows the rows; `catchUp` indexes past it in write transactions of at most one batch
 * each (rows and progress together: two processes indexing the same user serialize on the write lock and
 * the second finds the work done). Every search catches its user up first, so it finds every committed row
 * whoever wrote it; the background feed (`SearchIndexFeed`, services/Search.ts) catches users up shortly
 * after their writes commit, so a search rarely has anything left to do.
 *
 * Positions. A post never changes: its position is its `posts.pos`, and a batch inserts the posts past the
 * progress. Documents and facts do change (a revert deletes them, a revert of that restores them), so
 * their writers log each change (`changed`) into `<kind>_fts_changes`, whose `pos` (an integer primary key,
 * so it only grows) is the position; a batch re-reads the changed rows and makes the index say what they
 * say now: out of it first (by rowid: each row's index rowid is the position of its first change, so a
 * row is found without scanning the index), back into it if it is live. Only live rows are in the index.
 */

/** The kinds `sophia.search` ranks, each in an index of its own. */
export type TextKind = "documents" | "facts" | "posts"

/** The kinds whose rows change after they are written (a revert deletes or restores them). */
export type ChangingKind = "documents" | "facts"

/** The words of a free-text query (at most 32): letters, digits and `_`; no query syntax leaks through. */
const wordsOf = (text: string) => (text.match(/[\p{L}\p{N}_]+/gu) ?? []).slice(0, 32)

/** The words as an FTS5 expression: each word quoted, any may match. */
const ftsQuery = (text: string): string | undefined => {
  const words = wordsOf(text)
  return words.length === 0 ? undefined : words.map((w) => `"${w}"`).join(" OR ")
}

/** The same words as a Postgres `tsquery` (each a quoted lexeme, any may match). */
const tsQuery = (text: string): string | undefined => {
  const words = wordsOf(text)
  return words.length === 0 ? undefined : words.map((w) => `'${w.toLowerCase()}'`).join(" | ")
}

/** How each kind is ranked and cut into a snippet on each store. */
interface Ranking {
  /** the rows (aliased `b` in the statements) */
  readonly table: string
  /** SQLite: the FTS5 table and its column holding the row's id */
  readonly fts: string
  readonly key: string
  /** SQLite: BM25, as a rank (lower is better) */
  readonly bm25: string
  /** Postgres: over `b.search` and the query `q.q` (higher is better) */
  readonly tsRank: string
  /** Postgres: the text a snippet is cut from, and how */
  readonly headline: string
  readonly headlineOptions: string
  /** the rows are soft-deleted (`deleted_at`) and carry an entity (`entity_id`) */
  readonly live: boolean
}

const RANKING: Record<TextKind, Ranking> = {
  documents: {
    table: "documents",
    fts: "documents_fts",
    key: "document_id",
    // the title weighs 3× the body (the three unindexed columns weigh nothing); on Postgres the title is
    // weight A, the body B, and ts_rank's weights {D, C, B, A} put B at a third of A
    bm25: "bm25(documents_fts, 0.0, 0.0, 0.0, 3.0, 1.0)",
    tsRank: "ts_rank('{0, 0, 0.3333, 1.0}', b.search, q.q)",
    headline: "b.title || ' — ' || b.body",
    headlineOptions: "StartSel=[, StopSel=], MaxWords=16, MinWords=4, ShortWord=1, FragmentDelimiter=…, MaxFragments=2",
    live: true
  },
  facts: {
    table: "facts",
    fts: "facts_fts",
    key: "fact_id",
    bm25: "bm25(facts_fts)",
    tsRank: "ts_rank(b.search, q.q)",
    headline: "b.subject || ' ' || b.predicate || ' ' || b.object",
    headlineOptions: "StartSel=[, StopSel=], MaxWords=16, MinWords=4",
    live: true
  },
  posts: {
    table: "posts",
    fts: "posts_fts",
    key: "post_id",
    bm25: "bm25(posts_fts)",
    tsRank: "ts_rank(b.search, q.q)",
    headline: "b.body",
    headlineOptions: "StartSel=[, StopSel=], MaxWords=16, MinWords=4",
    live: false
  }
}

/** How a changing kind's SQLite index is written from its rows. */
interface ChangeLogged {
  readonly changes: string
  readonly progress: string
  /** the indexed columns after id and user, as `documents_fts` declares them */
  readonly columns: ReadonlyArray<string>
  /**
   * Rows a batch indexes at most. Posts take 1,000 (≤ 32 KiB each); a document may hold 256 KiB, so 128
   * keep a batch's text, and the time it holds the write lock, within the posts' worst case; facts are
   * three short terms.
   */
  readonly batch: number
}

const CHANGE_LOGGED: Record<ChangingKind, ChangeLogged> = {
  documents: { changes: "documents_fts_changes", progress: "documents_fts_progress", columns: ["entity_id", "title", "body"], batch: 128 },
  facts: { changes: "facts_fts_changes", progress: "facts_fts_progress", columns: ["entity_id", "subject", "predicate", "object"], batch: 1000 }
}
const POSTS_BATCH = 1000

/** What a caller asks of `matches`. */
export interface MatchQuery {
  readonly userId: string
  readonly text: string
  readonly limit: number
  /** only rows of these entities (documents, facts); undefined = no scope, empty = nothing */
  readonly scope?: ReadonlyArray<string> | undefined
}

const decodeState = Schema.decodeUnknown(Schema.Tuple(Schema.Struct({ indexed: DbInt, newest: DbInt })))
const decodePositions = Schema.decodeUnknown(Schema.Array(Schema.Struct({ pos: DbInt })))
const decodeUsers = Schema.decodeUnknown(Schema.Array(Schema.Struct({ user_id: Schema.String })))

const IDENTIFIER = /^[a-z_]+$/
const columnsOf = (alias: string, columns: ReadonlyArray<string>) =>
  columns.map((c) => {
    if (!IDENTIFIER.test(c)) throw new Error(`FullText: not a column name: ${c}`)
    return `${alias}.${c}`
  }).join(", ")

/** One kind's batches on SQLite: where its positions come from and how a range of them is indexed. */
interface Source {
  readonly state: (p: { userId: string }) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  /** the last position of the batch that starts after `indexed` */
  readonly bound: (userId: string, indexed: number, newest: number) => Effect.Effect<number, SqlError | ParseError>
  readonly write: (p: { userId: string; after: number; upTo: number }) => Effect.Effect<unknown, SqlError>
  readonly progressed: (p: { userId: string; pos: number }) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  /** the users with rows past their progress */
  readonly behind: (p: {}) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
}

const literal = (sql: SqlClient.SqlClient) => (s: string) => sql.literal(s)

/** A kind's progress row moved to `pos`. */
const progressedIn = (sql: SqlClient.SqlClient, named: Statements["named"], table: string) =>
  named(`FullText.${table}.progressed`, (p: { userId: string; pos: number }) =>
    sql`INSERT INTO ${sql.literal(table)} (user_id, pos) VALUES (${p.userId}, ${p.pos})
      ON CONFLICT (user_id) DO UPDATE SET pos = excluded.pos`)

/** Posts: positions on the rows (`posts.pos`); a post never changes, so a batch only inserts. */
const postsSource = (sql: SqlClient.SqlClient, named: Statements["named"]): Source => ({
  state: named("FullText.posts.state", (p: { userId: string }) =>
    sql`SELECT COALESCE((SELECT pos FROM posts_fts_progress WHERE user_id = ${p.userId}), 0) AS indexed,
      COALESCE((SELECT MAX(pos) FROM posts WHERE user_id = ${p.userId}), 0) AS newest`),
  // a user's posts have every position from 1 to the newest
  bound: (_userId, indexed, newest) => Effect.succeed(Math.min(newest, indexed + POSTS_BATCH)),
  write: named("FullText.posts.index", (p: { userId: string; after: number; upTo: number }) =>
    sql`INSERT INTO posts_fts (post_id, user_id, body) SELECT id, user_id, body FROM posts
      WHERE user_id = ${p.userId} AND pos > ${p.after} AND pos <= ${p.upTo} ORDER BY pos`),
  progressed: progressedIn(sql, named, "posts_fts_progress"),
  behind: named("FullText.posts.behind", () =>
    sql`SELECT c.user_id FROM post_counters c LEFT JOIN posts_fts_progress p ON p.user_id = c.user_id
      WHERE c.last_pos > COALESCE(p.pos, 0)`)
})

/**
 * Documents and facts: positions in the kind's change log; a batch makes the index say what the changed
 * rows say now.
 */
const changeLogSource = (sql: SqlClient.SqlClient, named: Statements["named"], kind: ChangingKind): Source => {
  const text = literal(sql)
  const { fts, key, table } = RANKING[kind]
  const { batch, changes, columns, progress } = CHANGE_LOGGED[kind]
  const [rows, index, id, log] = [text(table), text(fts), text(key), text(changes)]
  const boundAfter = named(`FullText.${kind}.bound`, (p: { userId: string; after: number }) =>
    sql`SELECT pos FROM ${log} WHERE user_id = ${p.userId} AND pos > ${p.after} ORDER BY pos ${sql.literal(`LIMIT 1 OFFSET ${batch - 1}`)}`)
  // the rows changed in the range leave the index, each at its first change's position (the rowid the log
  // reserves for it). Unconditionally: a row first changed in this range should not be there yet, but if
  // something else wrote that rowid (a process of an older version writing the index itself), the batch
  // replaces it instead of failing on every retry
  const unindex = named(`FullText.${kind}.unindex`, (p: { userId: string; after: number; upTo: number }) =>
    sql`DELETE FROM ${index} WHERE rowid IN (
        SELECT (SELECT MIN(f.pos) FROM ${log} f WHERE f.${id} = c.${id}) FROM ${log} c
        WHERE c.user_id = ${p.userId} AND c.pos > ${p.after} AND c.pos <= ${p.upTo})`)
  // and the live ones come back, each once, in rowid order (FTS5 appends ascending rowids cheapest)
  const reindex = named(`FullText.${kind}.index`, (p: { userId: string; after: number; upTo: number }) =>
    sql`INSERT INTO ${index} (rowid, ${id}, user_id, ${text(columns.join(", "))})
      SELECT (SELECT MIN(f.pos) FROM ${log} f WHERE f.${id} = b.id) AS first_pos, b.id, b.user_id, ${text(columnsOf("b", columns))}
      FROM ${rows} b
      WHERE b.id IN (SELECT ${id} FROM ${log} WHERE user_id = ${p.userId} AND pos > ${p.after} AND pos <= ${p.upTo})
        AND b.deleted_at IS NULL
      ORDER BY first_pos`)
  return {
    state: named(`FullText.${kind}.state`, (p: { userId: string }) =>
      sql`SELECT COALESCE((SELECT pos FROM ${text(progress)} WHERE user_id = ${p.userId}), 0) AS indexed,
        COALESCE((SELECT MAX(pos) FROM ${log} WHERE user_id = ${p.userId}), 0) AS newest`),
    // positions are shared by every user: a user's next `batch` changes end wherever they end
    bound: (userId, indexed, newest) =>
      Effect.map(Effect.flatMap(boundAfter({ userId, after: indexed }), decodePositions), (next) => next[0]?.pos ?? newest),
    write: (p) => Effect.zipRight(unindex(p), reindex(p)),
    progressed: progressedIn(sql, named, progress),
    behind: named(`FullText.${kind}.behind`, () =>
      sql`SELECT c.user_id FROM (SELECT user_id, MAX(pos) AS newest FROM ${log} GROUP BY user_id) c
        LEFT JOIN ${text(progress)} p ON p.user_id = c.user_id WHERE c.newest > COALESCE(p.pos, 0)`)
  }
}

/**
 * The batches (SQLite): `changed` inside the write that changed documents or facts, `catchUp` before a
 * search and from the feed. Nothing to do on Postgres.
 */
const makeBatches = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named } = yield* makeStatements
  /** SQLite: the indexes are written in batches (Postgres indexes itself). */
  const batched = sql.onDialectOrElse({ pg: () => false, orElse: () => true })

  const sources: Record<TextKind, Source> | undefined = batched
    ? { documents: changeLogSource(sql, named, "documents"), facts: changeLogSource(sql, named, "facts"), posts: postsSource(sql, named) }
    : undefined

  const logChanges = batched
    ? {
      documents: named("FullText.documents.changed", (p: { userId: string; ids: string }) =>
        sql`INSERT INTO documents_fts_changes (user_id, document_id) SELECT ${p.userId}, value FROM json_each(${p.ids}) ORDER BY key`),
      facts: named("FullText.facts.changed", (p: { userId: string; ids: string }) =>
        sql`INSERT INTO facts_fts_changes (user_id, fact_id) SELECT ${p.userId}, value FROM json_each(${p.ids}) ORDER BY key`)
    }
    : undefined

  /**
   * Inside the write's transaction: these rows of the user were added, deleted or restored, and the index
   * is to follow (one statement whatever their number; nothing on Postgres).
   */
  const changed = (kind: ChangingKind, userId: string, ids: ReadonlyArray<string>): Effect.Effect<void, SqlError> =>
    logChanges === undefined || ids.length === 0 ? Effect.void : Effect.asVoid(logChanges[kind]({ userId, ids: JSON.stringify(ids) }))

  const stateOf = (source: Source, userId: string) =>
    Effect.map(Effect.flatMap(source.state({ userId }), decodeState), ([state]) => state)

  /** One batch past the user's progress, rows and progress in one write transaction; whether more are left. */
  const batchOf = (source: Source, userId: string) =>
    sql.withTransaction(Effect.gen(function*() {
      const { indexed, newest } = yield* stateOf(source, userId)
      if (newest <= indexed) return false
      const upTo = yield* source.bound(userId, indexed, newest)
      yield* source.write({ userId, after: indexed, upTo })
      yield* source.progressed({ userId, pos: upTo })
      return upTo < newest
    }))
  const drain = (source: Source, userId: string): Effect.Effect<void, SqlError | ParseError> =>
    Effect.flatMap(batchOf(source, userId), (more) => more ? drain(source, userId) : Effect.void)

  /** Index every row of the user's kind committed so far; one read, no write lock, when nothing is missing. */
  const catchUp = (kind: TextKind, userId: string): Effect.Effect<void, SqlError | ParseError> => {
    if (sources === undefined) return Effect.void
    const source = sources[kind]
    return Effect.flatMap(stateOf(source, userId), ({ indexed, newest }) => newest <= indexed ? Effect.void : drain(source, userId))
  }

  /** Catch these users up, or every user with rows past their progress when none are named. */
  const catchUpAll = (kind: TextKind, userIds?: Iterable<string>): Effect.Effect<void, SqlError | ParseError> =>
    sources === undefined ? Effect.void : Effect.gen(function*() {
      const users = userIds !== undefined
        ? [...userIds]
        : (yield* Effect.flatMap(sources[kind].behind({}), decodeUsers)).map((r) => r.user_id)
      for (const userId of users) yield* catchUp(kind, userId)
    })

  return { batched, changed, catchUp, catchUpAll } as const
})

/**
 * Two stages on either store: rank inside the index (user and scope filter there) and keep the best
 * `limit`, then cut snippets and read the rows' columns for those only (a snippet per match before
 * sorting is the slow path). Scores: SQLite's is BM25 negated, Postgres's ts_rank.
 */
const rankedStatement = (
  sql: SqlClient.SqlClient,
  r: Ranking,
  select: Statement.Fragment,
  p: { readonly userId: string; readonly match: string },
  limit: number,
  inScope: (column: string) => Statement.Fragment
) => {
  const text = literal(sql)
  return sql.onDialectOrElse({
    pg: () =>
      sql`WITH q AS (SELECT to_tsquery('simple', ${p.match}) AS q),
        top AS (
          SELECT b.id, ${text(r.tsRank)} AS score FROM ${text(r.table)} b, q
          WHERE b.search @@ q.q AND b.user_id = ${p.userId} ${text(r.live ? "AND b.deleted_at IS NULL" : "")} ${inScope("b.entity_id")}
          ORDER BY score DESC, b.id ${limitTo(sql, limit)}
        )
        SELECT b.id AS id, ${select},
          ts_headline('simple', ${text(r.headline)}, q.q, ${text(`'${r.headlineOptions}'`)}) AS snippet, top.score AS score
        FROM top JOIN ${text(r.table)} b ON b.id = top.id, q
        ORDER BY top.score DESC, b.id`,
    orElse: () =>
      sql`WITH top AS (
          SELECT rowid AS rid, ${text(r.bm25)} AS rank FROM ${text(r.fts)}
          WHERE ${text(r.fts)} MATCH ${p.match} AND user_id = ${p.userId} ${inScope("entity_id")}
          ORDER BY rank ${limitTo(sql, limit)}
        )
        SELECT b.id AS id, ${select}, snippet(${text(r.fts)}, -1, '[', ']', '…', 16) AS snippet, -top.rank AS score
        FROM top JOIN ${text(r.fts)} ON ${text(r.fts)}.rowid = top.rid
          JOIN ${text(r.table)} b ON b.id = ${text(r.fts)}.${text(r.key)}
        WHERE ${text(r.fts)} MATCH ${p.match} ${text(r.live ? "AND b.deleted_at IS NULL" : "")}
        ORDER BY top.rank, b.id`
  })
}

/**
 * Full-text search over the store: `matches` (ranked hits, caught up first), `changed` (inside the write
 * that changed documents or facts) and `catchUp` (the batches; for the background feed). Needs only
 * `SqlClient`; every instance works on the same tables, so the services and the feed each make their own.
 */
export const makeFullText = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const { named, namedValues, shaped } = yield* makeStatements
  const { batched, catchUp, catchUpAll, changed } = yield* makeBatches
  const text = literal(sql)

  /**
   * The user's rows of `kind` matching the words of a query, best first: each row's `id`, its `columns`,
   * a `snippet` (matches between `[` and `]`) and a `score` (higher is better), for the caller to decode.
   * A search: caught up with every committed row first. One named statement per LIMIT (and scope length).
   */
  const matches = (kind: TextKind, columns: ReadonlyArray<string>) => {
    const r = RANKING[kind]
    const select = text(columnsOf("b", columns))
    const matchOf = batched ? ftsQuery : tsQuery
    const everywhere = family((limit: number) =>
      named(`FullText.${kind}.matches`, (p: { userId: string; match: string }) => rankedStatement(sql, r, select, p, limit, () => sql``)))
    const inScope = family((limit: number) =>
      shaped(`FullText.${kind}.matchesInScope`, 256, (p: { userId: string; match: string; scope: ReadonlyArray<string> }) =>
        rankedStatement(sql, r, select, p, limit, (column) => sql`AND ${text(column)} IN ${sql.in(p.scope)}`)))
    return (q: MatchQuery): Effect.Effect<ReadonlyArray<unknown>, SqlError | ParseError> => {
      const match = matchOf(q.text)
      if (match === undefined || (q.scope !== undefined && q.scope.length === 0)) return Effect.succeed([])
      const ranked = q.scope === undefined
        ? everywhere(q.limit)({ userId: q.userId, match })
        : inScope(q.limit)({ userId: q.userId, match, scope: q.scope })
      // a search catches its user up first (every committed row is findable); if that write cannot be made
      // (another process holds the write lock past the busy timeout, a batch fails), the search still answers,
      // from the index as it stands: deleted rows stay hidden by the join, only the newest rows are missing,
      // and the feed retries them
      const caughtUp = catchUp(kind, q.userId).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning(`search: catching the ${kind} index up failed; ranking on the index as it stands`, cause))
      )
      return Effect.zipRight(caughtUp, ranked)
    }
  }

  /**
   * The first stage of `sophia.search`, ids only: the user's rows of `kind` matching the words, best first,
   * each `{ id, ref, score }` (`ref`: the row's index rowid on SQLite, which `hits` needs for its snippet; 0
   * on Postgres; `score` higher is better: SQLite's BM25 negated, Postgres's ts_rank). No snippet, no row read: as cheap as the index's own query. Caught up first, as `matches`.
   */
  const ranked = (kind: TextKind) => {
    const r = RANKING[kind]
    const statement = (p: { userId: string; match: string }, limit: number, inScope: (column: string) => Statement.Fragment) =>
      sql.onDialectOrElse({
        pg: () =>
          sql`SELECT b.id AS id, 0 AS ref, ${text(r.tsRank)} AS score FROM ${text(r.table)} b, to_tsquery('simple', ${p.match}) q(q)
            WHERE b.search @@ q.q AND b.user_id = ${p.userId} ${text(r.live ? "AND b.deleted_at IS NULL" : "")} ${inScope("b.entity_id")}
            ORDER BY score DESC, b.id ${limitTo(sql, limit)}`,
        orElse: () =>
          sql`SELECT ${text(r.key)} AS id, rowid AS ref, ${text(r.bm25)} AS score FROM ${text(r.fts)}
            WHERE ${text(r.fts)} MATCH ${p.match} AND user_id = ${p.userId} ${inScope("entity_id")}
            ORDER BY score ${limitTo(sql, limit)}`
      })
    const everywhere = family((limit: number) =>
      namedValues(`FullText.${kind}.ranked`, (p: { userId: string; match: string }) => statement(p, limit, () => sql``)))
    const inScope = family((limit: number) =>
      shaped(`FullText.${kind}.rankedInScope`, 256, (p: { userId: string; match: string; scope: ReadonlyArray<string> }) =>
        statement(p, limit, (column) => sql`AND ${text(column)} IN ${sql.in(p.scope)}`) as Statement.Statement<{ id: unknown; ref: unknown; score: unknown }>))
    const matchOf = batched ? ftsQuery : tsQuery
    return (q: MatchQuery): Effect.Effect<ReadonlyArray<{ id: string; ref: number; score: number }>, SqlError | ParseError> => {
      const match = matchOf(q.text)
      if (match === undefined || (q.scope !== undefined && q.scope.length === 0)) return Effect.succeed([])
      const rows = q.scope === undefined
        ? everywhere(q.limit)({ userId: q.userId, match })
        : Effect.map(inScope(q.limit)({ userId: q.userId, match, scope: q.scope }), (objects) =>
          objects.map((o) => [o.id, o.ref, o.score] as const))
      const caughtUp = catchUp(kind, q.userId).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning(`search: catching the ${kind} index up failed; ranking on the index as it stands`, cause))
      )
      return Effect.zipRight(caughtUp, Effect.map(rows, (rs) => rs.map(([id, ref, score]) => ({ id: String(id), ref: Number(ref), score: batched ? -Number(score) : Number(score) }))))
    }
  }

  /**
   * The second stage: the rows of these ids (the final page only), each with its `columns` and a `snippet` —
   * the matched words between `[` and `]` where the row matched the query (on SQLite the rows whose index
   * `refs` the first stage returned), else the start of its text (a row only dense retrieval found). Live
   * rows of the user only, within `scope` when given: a row that left since the first stage is not returned.
   */
  const hits = (kind: TextKind, columns: ReadonlyArray<string>) => {
    const r = RANKING[kind]
    const select = text(columnsOf("b", columns))
    const head = text(`substr(${r.headline}, 1, 200)`)
    const live = text(r.live ? "AND b.deleted_at IS NULL" : "")
    type P = { userId: string; match: string; ids: ReadonlyArray<string>; refs: ReadonlyArray<number>; scope: ReadonlyArray<string> }
    const scoped = (p: P) => p.scope.length > 0 ? sql`AND b.entity_id IN ${sql.in(p.scope)}` : sql``
    // Postgres: the rows and their headlines in one statement
    const withHeadlines = shaped(`FullText.${kind}.hits`, 512, (p: P) =>
      sql`SELECT b.id AS id, ${select}, ts_headline('simple', ${text(r.headline)}, to_tsquery('simple', ${p.match}),
          ${text(`'${r.headlineOptions}'`)}) AS snippet
        FROM ${text(r.table)} b WHERE b.id IN ${sql.in(p.ids)} AND b.user_id = ${p.userId} ${live} ${scoped(p)}`)
    // SQLite: the rows, and apart the snippets of the index rows the ranking named (one statement each: joined
    // to the rows, SQLite walked every match of the query, or ran it once per row — measured 2–18 ms against
    // 0.15 ms for the two)
    // (by primary key: on SQLite `+` keeps the planner off the (user_id, …) indexes, which it chose for posts
    // and then walked every post of the user — measured 2.4 ms against µs)
    const owner = text(batched ? "+b.user_id" : "b.user_id")
    const plain = shaped(`FullText.${kind}.rows`, 512, (p: Omit<P, "match" | "refs">) =>
      sql`SELECT b.id AS id, ${select}, ${head} AS snippet FROM ${text(r.table)} b
        WHERE b.id IN ${sql.in(p.ids)} AND ${owner} = ${p.userId} ${live} ${scoped(p as P)}`)
    const snippets = shaped(`FullText.${kind}.snippets`, 512, (p: { match: string; refs: ReadonlyArray<number> }) =>
      sql`SELECT ${text(r.key)} AS id, snippet(${text(r.fts)}, -1, '[', ']', '…', 16) AS snippet FROM ${text(r.fts)}
        WHERE ${text(r.fts)} MATCH ${p.match} AND rowid IN ${sql.in(p.refs)}`)
    const matchOf = batched ? ftsQuery : tsQuery
    return (q: {
      readonly userId: string
      readonly text: string
      readonly ids: ReadonlyArray<string>
      readonly refs: ReadonlyArray<number>
      readonly scope?: ReadonlyArray<string> | undefined
    }): Effect.Effect<ReadonlyArray<unknown>, SqlError> => {
      if (q.ids.length === 0 || (q.scope !== undefined && q.scope.length === 0)) return Effect.succeed([])
      const match = matchOf(q.text)
      const scope = q.scope ?? []
      if (!batched) {
        return match === undefined
          ? plain({ userId: q.userId, ids: q.ids, scope })
          : withHeadlines({ userId: q.userId, match, ids: q.ids, refs: [], scope })
      }
      const rows = plain({ userId: q.userId, ids: q.ids, scope })
      if (match === undefined || q.refs.length === 0) return rows
      return Effect.map(Effect.zip(rows, snippets({ match, refs: q.refs })), ([found, cut]) => {
        const byId = new Map((cut as ReadonlyArray<{ id: unknown; snippet: unknown }>).map((c) => [String(c.id), c.snippet]))
        return (found as ReadonlyArray<Record<string, unknown>>).map((row) => byId.has(String(row.id)) ? { ...row, snippet: byId.get(String(row.id)) } : row)
      })
    }
  }

  return { batched, matches, ranked, hits, changed, catchUp, catchUpAll } as const
})

/** What `makeFullText` gives. */
export type FullText = Effect.Effect.Success<typeof makeFullText>
