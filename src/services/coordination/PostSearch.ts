import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { DbInt } from "../../domain/Time.js"
import { spanned } from "../Spans.js"
import { makeFullText } from "../store/FullText.js"

const decodePostHits = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  id: Schema.String,
  channel: Schema.String,
  channel_seq: DbInt,
  kind: Schema.String,
  connection_id: Schema.String,
  created_at: Schema.String,
  snippet: Schema.String,
  score: DbInt
})))

/**
 * The posts' full-text search (a module of the Coordination service, which returns its methods), through
 * `store/FullText.ts` like documents and facts. On SQLite a post is not indexed in its own transaction:
 * `posts_fts` follows `posts` in batches past the user's `posts_fts_progress` (the feed indexes them after
 * the posts commit, `SearchIndexFeed` in services/Search.ts) and `searchPosts` first indexes whatever of
 * the user's posts is still missing, so a search finds every committed post. Postgres indexes
 * `posts.search` itself. Tables: `posts_fts`, `posts_fts_progress`.
 */
export const makePostSearch = Effect.gen(function*() {
  const fullText = yield* makeFullText
  const matches = fullText.matches("posts", ["channel", "channel_seq", "kind", "connection_id", "created_at"])

  /**
   * Bring the full-text index up to date for these users, or for every user with unindexed posts when none
   * are named (a process starting on a file others wrote). Nothing on Postgres.
   */
  const indexPosts = (userIds?: Iterable<string>): Effect.Effect<void> => Effect.orDie(fullText.catchUpAll("posts", userIds))

  /**
   * The user's posts matching the words (BM25 over the body, best first, `bm25` higher is better), for
   * `sophia.search`. Posts are the user's fleet chatter: every connection of the user may find them (as
   * the inbox shows them), and they are never grounding. Every committed post of the user is searchable,
   * whoever wrote it and however recently.
   */
  const searchPosts = spanned(
    "Coordination.searchPosts",
    Effect.fnUntraced(function*(caller: Caller, text: string, limit: number) {
      const rows = yield* Effect.flatMap(matches({ userId: caller.userId, text, limit }), decodePostHits)
      return rows.map((r) => ({
        post_id: r.id,
        channel: r.channel,
        channel_seq: r.channel_seq,
        kind: r.kind,
        connection_id: r.connection_id,
        created_at: r.created_at,
        snippet: r.snippet,
        bm25: r.score
      }))
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  return { searchPosts, indexPosts } as const
})
