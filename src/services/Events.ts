import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, FiberRef, Layer, PubSub, type Queue, type Scope } from "effect"
import type { DomainEvent, DomainEventOf, DomainEventTag, RefusalOf } from "../domain/Events.js"
import { EnvelopeNeutral } from "./store/Statements.js"

/**
 * What a subscriber's failure does to the write that published the event. Every subscription names
 * one; there is no default, so the consequence of a failure is never an accident of wiring.
 */
export type SubscriberPolicy =
  /** the subscriber's work is part of the write: a failure (or defect) rolls the whole write back */
  | "atomic"
  /**
   * the subscriber runs in a savepoint: a failure undoes only what the subscriber wrote, is logged, and
   * the write that published the event stands
   */
  | "isolated"
  /**
   * as `atomic`, and the subscriber may refuse the write: its failure — a refusal the event allows
   * (`RefusalOf`, domain/Events.ts) — rolls the write back and is the write's refusal, when the write
   * published with `publishOrRefuse`; published with `publish`, a refusal is a defect like any failure
   */
  | "refusing"

export interface Subscription<T extends DomainEventTag> {
  readonly on: T
  /** who subscribes, for logs and the wiring listing (`Service.method`) */
  readonly name: string
  readonly policy: SubscriberPolicy
  /**
   * Which events concern the subscriber (all when absent). Saying so up front keeps the rest cheap: an
   * `isolated` subscriber costs a savepoint on every event it runs for.
   */
  readonly when?: ((event: DomainEventOf<T>) => boolean) | undefined
  readonly handle: (event: DomainEventOf<T>) => Effect.Effect<void, unknown>
}

/**
 * The service, publishing any event (`closedTo` undefined), or only the events of `closedTo`: another is a
 * defect, raised before any subscriber runs, so the write that published it rolls back. A `sophia` command's
 * process is built for the events its writes publish (layers/Commands.ts); one it did not foresee fails the
 * command whole instead of skipping subscribers it never wired.
 */
const make = (closedTo: ReadonlyArray<DomainEventTag> | undefined) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const subscriptions = new Map<DomainEventTag, Array<Subscription<any>>>()
    const committed = yield* PubSub.unbounded<DomainEvent>()
    // the events of the transaction this fiber is in (undefined: not inside `transaction`)
    const pending = yield* FiberRef.make<Array<DomainEvent> | undefined>(undefined)

    const runSubscriber = (subscription: Subscription<any>, event: DomainEvent): Effect.Effect<void, unknown> =>
      subscription.policy === "refusing"
        ? subscription.handle(event)
        : subscription.policy === "atomic"
        ? Effect.orDie(subscription.handle(event))
        : sql.withTransaction(subscription.handle(event)).pipe(
          Effect.catchAllCause((cause) =>
            Effect.logWarning(
              `subscriber ${subscription.name} failed on ${event._tag}: its own writes were undone, the write stands`,
              cause
            )
          )
        )

    const run = (event: DomainEvent): Effect.Effect<void, unknown> =>
      Effect.gen(function*() {
        if (closedTo !== undefined && !closedTo.includes(event._tag)) {
          return yield* Effect.die(
            new Error(
              `this process publishes only ${closedTo.join(", ") || "no events"}, not ${event._tag}: its subscribers are not wired here, so the write is undone`
            )
          )
        }
        for (const subscription of subscriptions.get(event._tag) ?? []) {
          if (subscription.when === undefined || subscription.when(event)) yield* runSubscriber(subscription, event)
        }
        const buffer = yield* FiberRef.get(pending)
        if (buffer !== undefined) buffer.push(event)
        else yield* PubSub.publish(committed, event)
      })

    /** Publish an event of the current write: run its subscribers now, tell listeners after commit. */
    const publish = (event: DomainEvent): Effect.Effect<void> => Effect.orDie(run(event))

    /**
     * `publish`, for a write its `refusing` subscribers may refuse: their refusal fails this effect (the write's
     * transaction then rolls back, and its events are never heard).
     */
    const publishOrRefuse = <E extends DomainEvent>(event: E): Effect.Effect<void, RefusalOf<E["_tag"]>> =>
      run(event) as Effect.Effect<void, RefusalOf<E["_tag"]>>

    /**
     * `sql.withTransaction` for a write that publishes: nested calls become savepoints whose events join
     * the enclosing transaction's; the outermost hands them to listeners once it has committed.
     */
    const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> => transact(effect, undefined)

    /**
     * `transaction`, for a write that changes nothing the envelope reads (`EnvelopeNeutral`,
     * services/store/Statements.ts) as long as it publishes only events of `tags` — what its subscribers did
     * shows in what they published (a wait resolved publishes `WaitResolved`). Its commit is then counted
     * neutral, and a quiet caller's envelope is answered again without reading (readmodel/Envelope.ts). Any
     * other event, or a nested transaction that does not say so, makes the commit an ordinary one.
     */
    const neutralTransaction = (tags: ReadonlyArray<DomainEventTag>) =>
    <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> => transact(effect, tags)

    const transact = <A, E, R>(
      effect: Effect.Effect<A, E, R>,
      neutral: ReadonlyArray<DomainEventTag> | undefined
    ): Effect.Effect<A, E | SqlError, R> =>
      Effect.gen(function*() {
        const outer = yield* FiberRef.get(pending)
        const buffer: Array<DomainEvent> = []
        // (emptied at the start of each attempt: a transaction the store runs again after a write conflict
        // must not hand listeners the rolled-back attempt's events too)
        const attempt = Effect.suspend(() => {
          buffer.length = 0
          return effect
        })
        // after the effect, inside the transaction (before its COMMIT): still neutral only if it published
        // nothing else
        const checked: Effect.Effect<A, E, R> = neutral === undefined
          ? (outer === undefined ? attempt : Effect.zipLeft(attempt, FiberRef.set(EnvelopeNeutral, false)))
          : Effect.tap(attempt, (): Effect.Effect<void> =>
            buffer.every((event) => neutral.includes(event._tag)) ? Effect.void : FiberRef.set(EnvelopeNeutral, false))
        const run: Effect.Effect<A, E | SqlError, R> = Effect.locally(sql.withTransaction(checked), pending, buffer)
        const result = yield* (neutral !== undefined && outer === undefined ? Effect.locally(run, EnvelopeNeutral, true) : run)
        if (outer !== undefined) outer.push(...buffer)
        else if (buffer.length > 0) yield* PubSub.publishAll(committed, buffer)
        return result
      })

    /** Wire a subscriber. Called where the layers are composed, before the app serves anything. */
    const subscribe = <T extends DomainEventTag>(subscription: Subscription<T>) =>
      Effect.sync(() => {
        const list = subscriptions.get(subscription.on)
        if (list) list.push(subscription)
        else subscriptions.set(subscription.on, [subscription])
      })

    /** The wiring as it stands: `[event, subscriber, policy]` in the order they run. */
    const wiring = () =>
      [...subscriptions.entries()].flatMap(([on, list]) => list.map((s) => [on, s.name, s.policy] as const))

    /** Committed events from now on, for as long as the scope lives. */
    const listen: Effect.Effect<Queue.Dequeue<DomainEvent>, never, Scope.Scope> = PubSub.subscribe(committed)

    /**
     * Hand listeners an event another daemon committed (it arrived over the store's notification channel,
     * see layers/CrossDaemon.ts). No subscriber runs: they ran inside the write that published it.
     */
    const deliver = (event: DomainEvent): Effect.Effect<void> => Effect.asVoid(PubSub.publish(committed, event))

    return { publish, publishOrRefuse, transaction, neutralTransaction, subscribe, wiring, listen, deliver } as const
  })

/**
 * The domain events service. A service publishes what its write witnessed with `publish`, inside the
 * write's transaction; the subscribers (wired once, where the layers are composed) run right there, in
 * subscription order, under their named policy. Writes that publish run under `transaction`, which is
 * `sql.withTransaction` plus a buffer: once the outermost transaction commits, its events go to the
 * `listen` queues (long polls, the portal's live view, cross-daemon notification) — a listener never
 * hears of a write that rolled back.
 */
export class Events extends Effect.Service<Events>()("sophia/Events", { scoped: make(undefined) }) {
  /** The service for a process whose writes publish only `tags` (see `make`). */
  static readonly closedTo = (tags: ReadonlyArray<DomainEventTag>): Layer.Layer<Events, never, SqlClient.SqlClient> =>
    Layer.scoped(Events, Effect.map(make(tags), Events.make))
}
