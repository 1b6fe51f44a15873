import { Effect } from "effect"
import { silentAfterSConfig } from "../domain/Orphans.js"
import { Auth } from "./Auth.js"
import { Events } from "./Events.js"
import { makeLedgerChain } from "./ledger/Chain.js"
import { makeCommit } from "./ledger/Commit.js"
import { makeLists } from "./ledger/Lists.js"
import { makeObservations } from "./ledger/Observations.js"
import { makeReads } from "./ledger/Reads.js"
import { makeLedgerStore } from "./ledger/Store.js"
import { makeVerify } from "./ledger/Verify.js"
import { makeWrites } from "./ledger/Writes.js"

export type { VerifyReport } from "./ledger/Verify.js"

/**
 * The ledger: per-user work items, each an append-only hash chain of typed events with one head moved
 * only by compare-and-swap; evidence classes that never downgrade; reviews with separation of duties.
 * Owns `ledger_work`, `ledger_events`, `ledger_fields`, `ledger_reviews`. What the server witnessed
 * elsewhere reaches it as domain events (`observePost`, `observeRevocation`, `observeWait`), wired where
 * the layers are composed.
 *
 * Its modules, one job each (src/services/ledger/): the store of head rows, fields and reviews (Store)
 * and of the chains (Chain), the one write path with its in-hand states (Commit, InHand), the writes
 * (Writes: append, observations, reviews), the reads of one item (Reads), the work lists (Lists),
 * verification (Verify) and the domain events it observes (Observations). This file assembles them.
 */
export class Ledger extends Effect.Service<Ledger>()("sophia/Ledger", {
  effect: Effect.gen(function*() {
    const auth = yield* Auth
    const events = yield* Events
    const silentAfterS = yield* Effect.orDie(silentAfterSConfig)
    const store = yield* makeLedgerStore
    const chain = yield* makeLedgerChain
    const commit = makeCommit(store, events)
    const writes = makeWrites({ commit, store, auth, silentAfterS })
    const reads = makeReads({ store, chain, auth })
    const lists = yield* makeLists({ auth, silentAfterS })
    const { verify } = makeVerify(store, chain)
    const observations = makeObservations({ claimedBy: lists.claimedBy, observe: writes.observe })

    return {
      append: writes.append,
      observe: writes.observe,
      requestReview: writes.requestReview,
      giveVerdict: writes.giveVerdict,
      status: reads.status,
      log: reads.log,
      diff: reads.diff,
      verify,
      events: reads.events,
      state: reads.state,
      countWork: lists.countWork,
      claimedBy: lists.claimedBy,
      claimedByConnections: lists.claimedByConnections,
      listWork: lists.listWork,
      orphanedWork: lists.orphanedWork,
      observesPost: observations.observesPost,
      observePost: observations.observePost,
      observesWait: observations.observesWait,
      observeRevocation: observations.observeRevocation,
      observeWait: observations.observeWait
    } as const
  })
}) {}
