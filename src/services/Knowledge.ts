import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { Caller } from "../domain/Auth.js"
import { KnowledgeChanged } from "../domain/Events.js"
import type {
  AddDocumentInput,
  BeginImportSessionInput,
  CreateEntityInput,
  QueryKnowledgeInput,
  RememberFactInput,
  SearchDocumentsInput,
  SubmitClaimGraphInput
} from "../domain/Knowledge.js"
import { Coordination } from "./Coordination.js"
import { Events } from "./Events.js"
import type { DocumentCursor } from "./knowledge/DocumentList.js"
import { makeDocumentList } from "./knowledge/DocumentList.js"
import { makeDocuments } from "./knowledge/Documents.js"
import { makeEntities } from "./knowledge/Entities.js"
import { makeFactQuery } from "./knowledge/FactQuery.js"
import { makeFacts } from "./knowledge/Facts.js"
import { makeJournal } from "./knowledge/Journal.js"
import type { KnowledgeKind, Retrieval, TimeCursor } from "./knowledge/Retrieval.js"
import { makeRetrieval } from "./knowledge/Retrieval.js"
import { spanned } from "./Spans.js"
import { makeFullText } from "./store/FullText.js"

/** `sophia.search`'s two stages and the embedding feed's source (knowledge/Retrieval.ts), as Knowledge's methods. */
const retrievalMethods = (retrieval: Retrieval) => {
  /** `sophia.search`'s first stage: a kind's ids ranked by BM25 within the caller's scope, best first. */
  const rank = spanned(
    "Knowledge.rank",
    Effect.fnUntraced(function*(caller: Caller, kind: KnowledgeKind, text: string, limit: number) {
      return yield* retrieval.rank(caller, kind, text, limit)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** `sophia.search`'s final page: the rows of these ids the caller may read (live, in scope), with snippets. */
  const hits = spanned(
    "Knowledge.hits",
    Effect.fnUntraced(function*(caller: Caller, kind: KnowledgeKind, text: string, refs: ReadonlyArray<{ id: string; ref: number | undefined }>) {
      return yield* retrieval.hits(caller, kind, text, refs)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** The entity ids the caller may read: undefined = no scope (everything), empty = nothing. */
  const scopeOf = spanned(
    "Knowledge.scopeOf",
    Effect.fnUntraced(function*(caller: Caller) {
      return yield* retrieval.scope(caller)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** The embedding feed's source: the next documents or facts after a cursor, every user's, oldest first. */
  const textsPast = spanned(
    "Knowledge.textsPast",
    Effect.fnUntraced(function*(kind: KnowledgeKind, after: TimeCursor, limit: number) {
      return yield* retrieval.textsPast(kind, after, limit)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  /** How many documents or facts lie past a cursor (the embedding backlog). */
  const countPast = spanned(
    "Knowledge.countPast",
    Effect.fnUntraced(function*(kind: KnowledgeKind, after: TimeCursor) {
      return yield* retrieval.countPast(kind, after)
    }, Effect.catchTag("SqlError", "ParseError", Effect.die))
  )

  return { rank, hits, scopeOf, textsPast, countPast } as const
}

/**
 * Knowledge: entities, documents (the only grounding sources), facts and the mutation journal. Every write
 * is one transaction that also writes its journal entry; every read is filtered by the caller's user and,
 * when the connection carries one, its entity scope. Full-text search goes through `store/FullText.ts`:
 * a write logs which documents or facts changed, a search catches the index up first.
 *
 * Ownership. This service owns `entities`, `documents`, `facts`, `fact_sources`, `import_sessions`,
 * `mutations` and their full-text indexes (`documents_fts`, `facts_fts`, their `_changes` and `_progress`).
 * Parts: knowledge/Entities.ts (entities and the entity scope), Documents.ts, DocumentList.ts (the listing without a
 * search), Facts.ts, FactQuery.ts, Journal.ts, Retrieval.ts (`sophia.search`'s two stages; the embedding feed's source).
 */
export class Knowledge extends Effect.Service<Knowledge>()("sophia/Knowledge", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    const coordination = yield* Coordination
    const fullText = yield* makeFullText
    const entities = yield* makeEntities
    const journal = yield* makeJournal(fullText)
    const documents = yield* makeDocuments(entities, fullText)
    const documentList = yield* makeDocumentList(entities)
    const facts = yield* makeFacts(entities, documents, coordination, fullText)
    const factQuery = yield* makeFactQuery(entities)

    /**
     * A write that changes documents or facts: its transaction publishes `KnowledgeChanged` (the search index
     * feed hears it once committed and catches the user's full-text indexes up; services/Search.ts).
     */
    const committing = <A, E, R>(effect: Effect.Effect<A, E, R>, caller: Caller) =>
      events.transaction(Effect.tap(effect, () => events.publish(new KnowledgeChanged({ user_id: caller.userId }))))

    // ------------------------------------------------------------------ writes

    const createEntity = spanned(
      "Knowledge.createEntity",
      Effect.fnUntraced(function*(caller: Caller, input: CreateEntityInput) {
        const { change, ...entity } = yield* entities.create(caller, input)
        const mutationId = yield* journal.record(caller, "sophia.create_entity", [change])
        return { ...entity, mutation_id: mutationId }
      }, sql.withTransaction, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    const addDocument = spanned(
      "Knowledge.addDocument",
      Effect.fnUntraced(function*(caller: Caller, input: AddDocumentInput) {
        const change = yield* documents.add(caller, input)
        const mutationId = yield* journal.record(caller, "sophia.add_document", [change])
        return { document_id: change.id, mutation_id: mutationId }
      }, committing, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** A bounded batch of documents, committed as one import session, or nothing at all. */
    const importDocuments = spanned(
      "Knowledge.importDocuments",
      Effect.fnUntraced(function*(caller: Caller, input: BeginImportSessionInput) {
        const { changes, sessionId } = yield* documents.importAll(caller, input)
        const mutationId = yield* journal.record(caller, "sophia.begin_import_session", changes)
        return {
          import_session_id: sessionId,
          status: "committed" as const,
          document_ids: changes.map((c) => c.id),
          mutation_id: mutationId
        }
      }, committing, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** Claims become facts only when every source is a document the caller can read (posts never ground). */
    const submitClaimGraph = spanned(
      "Knowledge.submitClaimGraph",
      Effect.fnUntraced(function*(caller: Caller, input: SubmitClaimGraphInput) {
        const changes = yield* facts.claim(caller, input)
        const mutationId = yield* journal.record(caller, "sophia.submit_claim_graph", changes)
        return { fact_ids: changes.map((c) => c.id), mutation_id: mutationId }
      }, committing, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** A fact without a document: only the owner's explicit approval makes this legitimate (an elevated tool). */
    const rememberFact = spanned(
      "Knowledge.rememberFact",
      Effect.fnUntraced(function*(caller: Caller, input: RememberFactInput) {
        const change = yield* facts.remember(caller, input)
        const mutationId = yield* journal.record(caller, "sophia.remember_fact", [change])
        return { fact_id: change.id, mutation_id: mutationId }
      }, committing, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /**
     * Write the compensating change of a journaled mutation: rows it created go (soft-deleted, out of the
     * index), rows it removed come back. The revert is journaled itself (and can be reverted in turn).
     */
    const revert = spanned(
      "Knowledge.revert",
      Effect.fnUntraced(function*(caller: Caller, mutationId: string) {
        return yield* journal.revert(caller, mutationId)
      }, committing, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    // ------------------------------------------------------------------ reads
    /** Full-text search of documents, best match first, within the caller's scope. */
    const search = spanned(
      "Knowledge.search",
      Effect.fnUntraced(function*(caller: Caller, input: SearchDocumentsInput) {
        return yield* documents.search(caller, input)
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** Live facts matching the words (`bm25` higher is better), within the caller's scope. For `sophia.search`. */
    const searchFacts = spanned(
      "Knowledge.searchFacts",
      Effect.fnUntraced(function*(caller: Caller, text: string, limit: number) {
        return yield* facts.search(caller, text, limit)
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** Facts by subject / predicate (case-insensitive) and/or a substring of any part, each with its sources. */
    const query = spanned(
      "Knowledge.query",
      Effect.fnUntraced(function*(caller: Caller, input: QueryKnowledgeInput) {
        return yield* factQuery.query(caller, input)
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** The caller's journal, newest first (for the owner and tests). */
    const mutations = spanned(
      "Knowledge.mutations",
      Effect.fnUntraced(function*(caller: Caller, limit: number = 50) {
        return yield* journal.list(caller, limit)
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** How many live documents the caller may read (its entity scope applied exactly as the read tools do). */
    const countDocuments = spanned(
      "Knowledge.countDocuments",
      Effect.fnUntraced(function*(caller: Caller) {
        return yield* documents.count(caller)
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    /** The caller's documents within its scope, newest first, a bounded page after a cursor (the portal's listing). */
    const recentDocuments = spanned(
      "Knowledge.recentDocuments",
      Effect.fnUntraced(function*(caller: Caller, limit: number, before?: DocumentCursor) {
        return yield* documentList.newestFirst(caller, limit, before)
      }, Effect.catchTag("SqlError", "ParseError", Effect.die))
    )

    return {
      createEntity,
      addDocument,
      importDocuments,
      submitClaimGraph,
      rememberFact,
      revert,
      search,
      searchFacts,
      ...retrievalMethods(yield* makeRetrieval(entities, fullText)),
      query,
      mutations,
      countDocuments,
      recentDocuments
    } as const
  })
}) {}
