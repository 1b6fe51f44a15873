import { Duration, Effect, Layer, Queue } from "effect"
import type { ProviderFailed } from "../../domain/Embeddings.js"
import { Coordination } from "../Coordination.js"
import { Embeddings } from "../Embeddings.js"
import { Events } from "../Events.js"
import { Knowledge } from "../Knowledge.js"
import type { KnowledgeKind, TimeCursor } from "../knowledge/Retrieval.js"
import type { Progress } from "./Vectors.js"
import { START } from "./Vectors.js"

/** Documents and facts are re-read from this far behind the cursor (rows committed out of `created_at` order). */
const GRACE_MS = 10_000
/** Without a committed write heard, the feed looks anyway this often (another process's writes on the same file). */
const IDLE_LOOK = Duration.seconds(30)
/** After a provider failure the feed waits 1 s, doubling up to a minute. */
const BACKOFF_MAX_MS = 60_000

const later = (a: TimeCursor, b: TimeCursor) => a.at > b.at || (a.at === b.at && a.id > b.id)
const behind = (at: string): string => at === "" ? "" : new Date(Math.max(0, Date.parse(at) - GRACE_MS)).toISOString()

/**
 * The embedding feed: documents, facts and posts embedded in background batches, never inside the write
 * that made them (a post commits whatever the provider does). It hears committed `PostLanded` and
 * `KnowledgeChanged` events, waits `SOPHIA_SEARCH_INDEX_DELAY_MS`-like 250 ms to gather a burst, then reads
 * from the owners what lies past its progress — posts by each user's position (`Coordination.postsPast`),
 * documents and facts by time (`Knowledge.textsPast`, re-reading 10 s behind the cursor and skipping what
 * is embedded) — asks the provider a batch at a time (the next batch read while the provider works on this
 * one) and stores vectors and progress together (`Embeddings.store`). At start, and every 30 s without an
 * event, it looks anyway. A provider failure is logged and retried with backoff (1 s doubling to a
 * minute); the rows stay in the backlog (`Embeddings.status`, shown by `orient` and `/metrics`).
 * Off without `SOPHIA_EMBEDDINGS_URL`.
 */
export const EmbeddingFeed = Layer.scopedDiscard(Effect.gen(function*() {
  const embeddings = yield* Embeddings
  if (!embeddings.configured) return
  const events = yield* Events
  const coordination = yield* Coordination
  const knowledge = yield* Knowledge
  const batch = embeddings.batchSize
  const due = yield* Queue.sliding<true>(1)
  const committed = yield* events.listen
  yield* Queue.take(committed).pipe(
    Effect.flatMap((event) => event._tag === "PostLanded" || event._tag === "KnowledgeChanged" ? Queue.offer(due, true) : Effect.void),
    Effect.forever,
    Effect.forkScoped
  )

  /** A page read past a cursor: the rows to embed and where the page ended (undefined: nothing more). */
  type Page<Row, C> = { readonly rows: ReadonlyArray<Row>; readonly end: C } | undefined

  /** Embed pages one after another, the next page read while the provider embeds this one. */
  const pipeline = <Row, C>(
    first: Page<Row, C>,
    read: (after: C) => Effect.Effect<Page<Row, C>>,
    text: (row: Row) => string,
    save: (rows: ReadonlyArray<Row>, vectors: ReadonlyArray<Float32Array>, end: C) => Effect.Effect<void>
  ): Effect.Effect<void, ProviderFailed> =>
    Effect.gen(function*() {
      let page = first
      while (page !== undefined) {
        const { end, rows } = page
        const [vectors, following] = yield* Effect.all(
          [rows.length > 0 ? embeddings.embedBatch(rows.map(text)) : Effect.succeed([]), read(end)],
          { concurrency: 2 }
        )
        yield* save(rows, vectors, end)
        page = following
      }
    })

  const drainPosts = (userId: string, after: number) => {
    const read = (from: number) =>
      Effect.map(coordination.postsPast(userId, from, batch), (rows) => rows.length === 0 ? undefined : { rows, end: rows[rows.length - 1].pos })
    return Effect.flatMap(read(after), (first) =>
      pipeline(first, read, (row) => row.text, (page, vectors, end) => {
        const rows = page.map((row, i) => ({ kind: "posts" as const, itemId: row.id, userId, entityId: null, vector: vectors[i] }))
        return embeddings.store(rows, "posts", userId, { pos: end, at: "", itemId: page[page.length - 1].id })
      }))
  }

  /** From 10 s behind the cursor (what is embedded already is skipped); the progress never moves back. */
  const drainKnowledge = (kind: KnowledgeKind, progress: Progress) =>
    Effect.gen(function*() {
      const read = (from: TimeCursor) =>
        Effect.gen(function*() {
          const raw = yield* knowledge.textsPast(kind, from, batch)
          if (raw.length === 0) return undefined
          const known = yield* embeddings.embeddedAmong(kind, raw.map((r) => r.id))
          const last = raw[raw.length - 1]
          return { rows: raw.filter((r) => !known.has(r.id)), end: { at: last.created_at, id: last.id } }
        })
      let cursor: TimeCursor = { at: progress.at, id: progress.itemId }
      const first = yield* read({ at: behind(cursor.at), id: "" })
      yield* pipeline(first, read, (row) => row.text, (page, vectors, end) => {
        const moved = later(end, cursor)
        if (moved) cursor = end
        if (page.length === 0 && !moved) return Effect.void
        const rows = page.map((row, i) => ({ kind, itemId: row.id, userId: row.user_id, entityId: row.entity_id, vector: vectors[i] }))
        return embeddings.store(rows, kind, "", { pos: 0, at: cursor.at, itemId: cursor.id })
      })
    })

  /** One look: count the backlog, then embed everything past the progress. */
  const pass = Effect.gen(function*() {
    const positions = yield* coordination.postPositions()
    const postProgress = yield* embeddings.progress("posts")
    const knowledgeProgress = {
      documents: (yield* embeddings.progress("documents")).get("") ?? START,
      facts: (yield* embeddings.progress("facts")).get("") ?? START
    }
    let backlog = 0
    for (const p of positions) backlog += Math.max(0, p.last_pos - (postProgress.get(p.user_id)?.pos ?? 0))
    for (const kind of ["documents", "facts"] as const) {
      backlog += yield* knowledge.countPast(kind, { at: knowledgeProgress[kind].at, id: knowledgeProgress[kind].itemId })
    }
    yield* embeddings.counted(backlog)
    for (const p of positions) {
      const after = postProgress.get(p.user_id)?.pos ?? 0
      if (p.last_pos > after) yield* drainPosts(p.user_id, after)
    }
    for (const kind of ["documents", "facts"] as const) yield* drainKnowledge(kind, knowledgeProgress[kind])
  })

  let backoff = 0
  const attempt = pass.pipe(
    Effect.tap(() => Effect.sync(() => void (backoff = 0))),
    Effect.catchAll((failure) =>
      Effect.gen(function*() {
        backoff = Math.min(BACKOFF_MAX_MS, backoff === 0 ? 1000 : backoff * 2)
        yield* Effect.logWarning(`embedding provider failed (${failure.reason}); retrying in ${backoff} ms`)
        yield* Effect.sleep(Duration.millis(backoff))
        yield* Queue.offer(due, true)
      })
    ),
    Effect.catchAllCause((cause) => Effect.logWarning("embedding a batch failed; retrying with the next write", cause))
  )
  const wake = Effect.zipRight(
    Effect.timeout(Queue.take(due), IDLE_LOOK).pipe(Effect.ignore),
    Effect.zipRight(Effect.sleep(Duration.millis(250)), Queue.takeAll(due))
  )
  yield* attempt.pipe(
    Effect.zipRight(Effect.forever(Effect.zipRight(wake, attempt))),
    Effect.annotateLogs({ fiber: "embeddings" }),
    Effect.forkScoped
  )
}))
