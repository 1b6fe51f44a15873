import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { EmbeddingKind } from "../../domain/Embeddings.js"
import { DbInt } from "../../domain/Time.js"
import { serialize } from "../store/Locking.js"
import { makeStatements } from "../store/Statements.js"

/** A vector to keep: whose it is, the entity it belongs to (documents, facts), and its unit-length values. */
export interface VectorRow {
  readonly kind: EmbeddingKind
  readonly itemId: string
  readonly userId: string
  readonly entityId: string | null
  readonly vector: Float32Array
}

/** Where the feed stands in a kind (posts: per user by position; documents and facts: every user's, by time). */
export interface Progress {
  readonly pos: number
  readonly at: string
  readonly itemId: string
}

export const START: Progress = { pos: 0, at: "", itemId: "" }

const decodeProgress = Schema.decodeUnknown(Schema.Array(Schema.Struct({
  user_id: Schema.String,
  pos: DbInt,
  at: Schema.String,
  item_id: Schema.String
})))
const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ item_id: Schema.String })))

/** Little-endian float32 bytes of a vector (the stored form), and back. */
export const toBytes = (v: Float32Array): Uint8Array => new Uint8Array(v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength))
export const fromBytes = (bytes: Uint8Array): Float32Array => {
  const copy = new Uint8Array(bytes.byteLength)
  copy.set(bytes)
  return new Float32Array(copy.buffer)
}

/**
 * The Embeddings service's tables (migration 0024): `embedding_vectors` and `embedding_progress`. A batch's
 * vectors and the feed's new progress are written in one transaction under the `embeddings` lock, so `seq`
 * commits in order on either store (a reader that holds every row up to a `seq` misses none below it).
 */
export const makeVectors = (model: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const { named, namedValues, shaped } = yield* makeStatements

    const progressOf = named("Embeddings.progress", (p: { model: string; kind: string }) =>
      sql`SELECT user_id, pos, at, item_id FROM embedding_progress WHERE model = ${p.model} AND kind = ${p.kind}`)
    const saveProgress = named("Embeddings.saveProgress", (p: {
      model: string
      kind: string
      userId: string
      pos: number
      at: string
      itemId: string
    }) =>
      sql`INSERT INTO embedding_progress (model, kind, user_id, pos, at, item_id)
        VALUES (${p.model}, ${p.kind}, ${p.userId}, ${p.pos}, ${p.at}, ${p.itemId})
        ON CONFLICT (model, kind, user_id) DO UPDATE SET pos = excluded.pos, at = excluded.at, item_id = excluded.item_id`)
    const newerThan = namedValues("Embeddings.newer", (p: { model: string; kind: string; userId: string; after: number }) =>
      sql`SELECT seq, item_id, entity_id, vector FROM embedding_vectors
        WHERE user_id = ${p.userId} AND kind = ${p.kind} AND model = ${p.model} AND seq > ${p.after} ORDER BY seq`)
    const embeddedOf = shaped("Embeddings.embedded", 1024, (p: { model: string; kind: string; ids: ReadonlyArray<string> }) =>
      sql`SELECT item_id FROM embedding_vectors WHERE model = ${p.model} AND kind = ${p.kind} AND item_id IN ${sql.in(p.ids)}`)

    /** The feed's progress in a kind, by user ('' for documents and facts). */
    const progress = (kind: EmbeddingKind) =>
      Effect.map(Effect.flatMap(progressOf({ model, kind }), decodeProgress), (rows) =>
        new Map(rows.map((r) => [r.user_id, { pos: r.pos, at: r.at, itemId: r.item_id } satisfies Progress])))

    /** Of these ids, the ones already embedded by this model. */
    const embedded = (kind: EmbeddingKind, ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed(new Set<string>())
        : Effect.map(Effect.flatMap(embeddedOf({ model, kind, ids }), decodeIds), (rows) => new Set(rows.map((r) => r.item_id)))

    /**
     * A batch's vectors and where the feed stands after it, together (a row embedded twice — two daemons'
     * feeds, a re-read past the cursor — keeps its first vector). The vectors are bound as bytes, which a
     * named statement's parameters are not, so this insert is built per batch.
     */
    const write = (rows: ReadonlyArray<VectorRow>, kind: EmbeddingKind, userId: string, next: Progress) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* serialize(sql, "embeddings")
        if (rows.length > 0) {
          yield* sql`INSERT INTO embedding_vectors ${
            sql.insert(rows.map((r) => ({
              model,
              kind: r.kind,
              item_id: r.itemId,
              user_id: r.userId,
              entity_id: r.entityId,
              vector: toBytes(r.vector)
            })))
          } ON CONFLICT (model, kind, item_id) DO NOTHING`
        }
        yield* saveProgress({ model, kind, userId, pos: next.pos, at: next.at, itemId: next.itemId })
      }))

    /** A user's vectors of a kind written after `seq` `after`, in order: `[seq, item_id, entity_id, bytes]`. */
    const newer = (userId: string, kind: EmbeddingKind, after: number) => newerThan({ model, kind, userId, after })

    return { progress, embedded, write, newer } as const
  })

export type Vectors = Effect.Effect.Success<ReturnType<typeof makeVectors>>
