import { Effect } from "effect"
import {
  AddDocumentInput,
  AddDocumentOutput,
  BeginImportSessionInput,
  BeginImportSessionOutput,
  CreateEntityInput,
  CreateEntityOutput,
  DOCUMENT_HIT_COMPACT,
  DocumentHit,
  FACT_COMPACT,
  FactRow,
  QueryKnowledgeInput,
  QueryKnowledgeOutput,
  RememberFactInput,
  RememberFactOutput,
  RevertMutationInput,
  RevertMutationOutput,
  SearchDocumentsInput,
  SearchDocumentsOutput,
  SubmitClaimGraphInput,
  SubmitClaimGraphOutput
} from "../../domain/Knowledge.js"
import { Knowledge } from "../../services/Knowledge.js"
import type { ToolAnnotations } from "../Registry.js"
import { APPEND_ONLY, defineTool, READ_ONLY } from "../Registry.js"

const DESTRUCTIVE: ToolAnnotations = { ...APPEND_ONLY, destructiveHint: true }

/** Documents, grounded claims, facts; the elevated tools that need the owner's explicit approval. */
export const knowledgeTools = Effect.gen(function*() {
  const knowledge = yield* Knowledge
  return [
    defineTool({
      name: "sophia.add_document",
      group: "knowledge",
      access: "write",
      transactional: true,
      description: "Store a primary-source document; its id can ground claims.",
      annotations: APPEND_ONLY,
      input: AddDocumentInput,
      output: AddDocumentOutput,
      handler: (input, { caller }) => knowledge.addDocument(caller, input)
    }),
    defineTool({
      name: "sophia.search_documents",
      group: "knowledge",
      access: "read",
      description: "Full-text document search (BM25, best first) with snippets; limit default 10.",
      annotations: READ_ONLY,
      input: SearchDocumentsInput,
      output: SearchDocumentsOutput,
      projection: { key: "items", row: DocumentHit, compact: DOCUMENT_HIT_COMPACT },
      handler: (input, { caller }) => knowledge.search(caller, input)
    }),
    defineTool({
      name: "sophia.submit_claim_graph",
      group: "knowledge",
      access: "write",
      transactional: true,
      description: "Record claims as facts, each citing documents (never posts). All or nothing.",
      annotations: APPEND_ONLY,
      input: SubmitClaimGraphInput,
      output: SubmitClaimGraphOutput,
      handler: (input, { caller }) => knowledge.submitClaimGraph(caller, input)
    }),
    defineTool({
      name: "sophia.query_knowledge",
      group: "knowledge",
      access: "read",
      description: "Facts by subject/predicate (case-insensitive) or text substring, with sources.",
      annotations: READ_ONLY,
      input: QueryKnowledgeInput,
      output: QueryKnowledgeOutput,
      projection: { key: "facts", row: FactRow, compact: FACT_COMPACT },
      handler: (input, { caller }) => knowledge.query(caller, input)
    }),
    defineTool({
      name: "sophia.remember_fact",
      group: "knowledge",
      access: "elevated",
      transactional: true,
      description: "Elevated (owner approval): a fact without a document.",
      annotations: APPEND_ONLY,
      input: RememberFactInput,
      output: RememberFactOutput,
      handler: (input, { caller }) => knowledge.rememberFact(caller, input)
    }),
    defineTool({
      name: "sophia.create_entity",
      group: "knowledge",
      access: "elevated",
      transactional: true,
      description: "Elevated (owner approval): an entity that documents and facts belong to.",
      annotations: APPEND_ONLY,
      input: CreateEntityInput,
      output: CreateEntityOutput,
      handler: (input, { caller }) => knowledge.createEntity(caller, input)
    }),
    defineTool({
      name: "sophia.begin_import_session",
      group: "knowledge",
      access: "elevated",
      transactional: true,
      // the request limit is mcp/Http.ts's DEFAULT_MAX_BODY_BYTES (test/AdvertisedLimits.test.ts holds them equal)
      description: "Elevated (owner approval): import ≤ 500 documents as one session, all or nothing; " +
        "over HTTP a call is ≤ 1 MiB: split bigger imports.",
      annotations: APPEND_ONLY,
      input: BeginImportSessionInput,
      output: BeginImportSessionOutput,
      handler: (input, { caller }) => knowledge.importDocuments(caller, input)
    }),
    defineTool({
      name: "sophia.revert_mutation",
      group: "knowledge",
      access: "elevated",
      transactional: true,
      description: "Elevated (owner approval): undo a knowledge write by mutation_id (journaled).",
      annotations: DESTRUCTIVE,
      input: RevertMutationInput,
      output: RevertMutationOutput,
      handler: (input, { caller }) => knowledge.revert(caller, input.mutation_id)
    })
  ]
})
