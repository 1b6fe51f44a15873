import { Effect } from "effect"
import type { PostKind } from "../domain/Coordination.js"
import { makeCaughtUp } from "./coordination/CaughtUp.js"
import { makeChannelLifecycle } from "./coordination/Channels.js"
import { makeDelivery } from "./coordination/Delivery.js"
import { makeInbox } from "./coordination/Inbox.js"
import { makeInboxPages } from "./coordination/InboxPages.js"
import { makeLookups } from "./coordination/Lookups.js"
import { makeRecent } from "./coordination/Recent.js"
import { makePostSearch } from "./coordination/PostSearch.js"
import { makePosting } from "./coordination/Posting.js"
import { makeReadMarks } from "./coordination/ReadMarks.js"
import { makeReceipts } from "./coordination/Receipts.js"
import { makeUnread } from "./coordination/Unread.js"
import { makePostValidation } from "./coordination/Validation.js"

/**
 * Coordination: typed posts, the per-connection inbox, and the lifecycle of `arc:` channels. This file
 * composes the service from its modules under `coordination/`, one job each:
 * - `Validation.ts`: a post's limits and checks, before anything is written;
 * - `Posting.ts`: `post` and `beacon`, the channel's and the user's counters, `PostLanded`;
 * - `Channels.ts`: a channel held still (`holdChannel`), archived by a closeout and re-opened;
 * - `ReadMarks.ts`: what each connection consumed (its own posts, its reads), its scan marks;
 * - `CaughtUp.ts`: where a new connection starts (caught up unless minted with its backlog);
 * - `InboxPages.ts`, `Inbox.ts`: the inbox's pages, long poll and watch; `Unread.ts`: the unread counts
 *   and the channel list;
 * - `Delivery.ts`: posts handed to a connection by a runtime's hook (`deliverNew`, `deliverToMe`), marked
 *   read as they are; `Receipts.ts`: who has had a post (`receipts`, its author's only);
 * - `Lookups.ts`: the small reads other services ask (`totals`, `lastSeq`, `firstPost`, `postIdsOf`);
 * - `PostSearch.ts`: the posts' full-text search and its index.
 *
 * Counting. `unreadCount` runs on every response of every tool, so it is two primary-key lookups:
 * `post_counters.visible` (the user's non-heartbeat posts in non-archived channels) minus
 * `inbox_state.consumed` (those of them that are the connection's own or that it has read). Both are
 * maintained inside the write transactions that change them: a post, a read that marks rows, and an
 * archive / un-archive (which moves a whole channel's per-connection counts in or out of the totals;
 * rare, O(connections that touched the channel)). The test suite checks the counters against the plain
 * anti-join definition after random operations.
 *
 * Inbox scans. The default view (unread only) is an anti-join against `reads`, bounded below by a
 * per-connection low-water mark (`inbox_state.lwm`, a post position below which nothing is unread in
 * the default view; per channel `inbox_channel_state.lwm_pos`, the same within one channel). A marking
 * read that saw everything up to some position advances it; re-opening a channel lowers the global one
 * again for connections that had not read all of it. Indexes: (user_id, pos) and (user_id, channel, pos).
 *
 * Start. A connection minted without its backlog starts caught up: `onConnectionCreated` (the subscriber of
 * Auth's `ConnectionCreated`, inside the minting transaction) records its consumed counts and scan marks as
 * if it had read everything committed so far, and its start position (`inbox_state.start_pos`): a post at
 * or below it is never unread for it. Posts targeted at it all land later (see `CaughtUp.ts`).
 *
 * Order. Each post gets the user's next position `pos` (allocated, like `channel_seq`, from a counter
 * row updated in the insert's transaction); the inbox is ordered by it, which within a channel is the
 * `channel_seq` order, and the cursor is a position.
 *
 * Events. Each post publishes `PostLanded` inside its write transaction, right after the row and its
 * channel lifecycle are written: the subscribers wired in `layers/App.ts` (a wait resolved by the post,
 * the ledger's observation of a closeout) commit or roll back with it. It hears `ConnectionCreated` (above). `post` may be called inside the
 * caller's own transaction (it then runs in a savepoint).
 *
 * Search. On SQLite a post is not indexed for `sophia.search` in its own transaction: the posts that landed
 * enter `posts_fts` in batches (store/FullText.ts, fed by `SearchIndexFeed` in services/Search.ts on committed
 * `PostLanded` events), and `searchPosts` first indexes whatever of the user's posts is still missing, so a
 * search finds every committed post. Postgres indexes `posts.search` itself.
 *
 * Ownership. This service owns `posts`, `reads`, `channels`, `channel_counters`, `post_counters`,
 * `inbox_state`, `inbox_channel_state`, `posts_fts`, `posts_fts_progress`; agent names are joined live
 * through `Auth.connections`. Other services ask it through its methods, never by reading these tables.
 */
export class Coordination extends Effect.Service<Coordination>()("sophia/Coordination", {
  effect: Effect.gen(function*() {
    const validation = yield* makePostValidation
    const channels = yield* makeChannelLifecycle
    const readMarks = yield* makeReadMarks
    const unread = yield* makeUnread
    const pages = yield* makeInboxPages
    const { beacon, post } = yield* makePosting({ validation, channels, readMarks })
    const { inbox, watchUnread, wouldReturn } = yield* makeInbox({
      inboxLimit: validation.limits.inboxLimit,
      pages,
      readMarks,
      unread
    })
    const { countToMe, deliverNew, deliverToMe } = yield* makeDelivery({ pages, readMarks, unread })
    const { receipts, targetReceipts } = yield* makeReceipts
    const { onConnectionCreated } = yield* makeCaughtUp
    const { firstPost, lastSeq, postIdsOf, totals } = yield* makeLookups
    const { recentChannels } = yield* makeRecent
    const { indexPosts, postHits, postPositions, postsPast, rankPosts, searchPosts } = yield* makePostSearch
    return {
      post,
      beacon,
      inbox,
      wouldReturn,
      watchUnread,
      deliverNew,
      deliverToMe,
      countToMe,
      receipts,
      targetReceipts,
      searchPosts,
      indexPosts,
      rankPosts,
      postHits,
      postsPast,
      postPositions,
      unreadCount: unread.unreadCount,
      unreadOf: unread.unreadOf,
      totals,
      lastSeq,
      firstPost,
      postIdsOf,
      recentChannels,
      holdChannel: channels.holdChannel,
      onConnectionCreated,
      /** the limits posts and inbox reads are held to (the tools' schemas advertise them) */
      limits: validation.limits
    } as const
  })
}) {}

export { PostRef } from "./coordination/Rows.js"
export type { PostKind }
