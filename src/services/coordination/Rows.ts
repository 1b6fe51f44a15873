import { Effect, Schema } from "effect"
import type { Caller } from "../../domain/Auth.js"
import { connectionShort } from "../../domain/Auth.js"
import type { PostRow } from "../../domain/Coordination.js"
import { PostKind as PostKindSchema } from "../../domain/Coordination.js"
import { DbInt } from "../../domain/Time.js"

/**
 * The row shapes the Coordination service's modules share: a post as an inbox page reads it (with the
 * reader's read mark and its channel's archive flag) and as it is handed out (`toPostRow`), and a post as
 * other services ask about it (`PostRef`).
 */

/** A post as an inbox page selects it (`InboxPages.ts`), read marks and archive flag joined. */
export const DbPostRow = Schema.Struct({
  id: Schema.String,
  pos: DbInt,
  channel: Schema.String,
  channel_seq: DbInt,
  kind: PostKindSchema,
  body: Schema.String,
  // the stored JSON texts, parsed when a row becomes a PostRow (`storedRefs`, `storedPayload`): most posts
  // carry "[]" and no payload, and a page decodes twice as fast without a JSON transformation per row
  refs: Schema.String,
  payload: Schema.NullOr(Schema.String),
  connection_id: Schema.String,
  to_selector: Schema.NullOr(Schema.String),
  to_connection_id: Schema.NullOr(Schema.String),
  based_on_seq: Schema.NullOr(DbInt),
  created_at: Schema.String,
  is_read: DbInt,
  archived: DbInt
})
export type DbPostRow = typeof DbPostRow.Type
export const decodePostRows = Schema.decodeUnknown(Schema.Array(DbPostRow))

// (a stored text that does not decode is a defect, as a row that does not decode is)
const decodeRefs = Schema.decodeSync(Schema.parseJson(Schema.Array(Schema.String)))
const decodePayload = Schema.decodeSync(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })))
const storedRefs = (text: string): ReadonlyArray<string> => (text === "[]" ? [] : decodeRefs(text))
const storedPayload = (text: string | null) => (text === null ? null : decodePayload(text))

/** One count that may be missing (`SELECT … AS n`: no row, or NULL). */
export const decodeOptionalNumber = Schema.decodeUnknown(Schema.Array(Schema.Struct({ n: Schema.NullOr(DbInt) })))

/** A post as its reader sees it; the agents' names are joined live by the caller (a rename relabels past posts). */
export const toPostRow = (caller: Caller, row: DbPostRow, agentName: string, toAgentName: string | null): PostRow => ({
  post_id: row.id,
  channel: row.channel,
  channel_seq: row.channel_seq,
  kind: row.kind,
  body: row.body,
  references: storedRefs(row.refs),
  payload: storedPayload(row.payload),
  connection_id: row.connection_id,
  connection_short: connectionShort(row.connection_id),
  agent_name: agentName,
  to: row.to_selector,
  to_connection_id: row.to_connection_id,
  to_agent_name: toAgentName,
  based_on_seq: row.based_on_seq,
  behind_by: row.based_on_seq === null ? null : Math.max(0, row.channel_seq - 1 - row.based_on_seq),
  mine: row.connection_id === caller.connectionId,
  unread: row.connection_id !== caller.connectionId && row.is_read === 0,
  created_at: row.created_at
})

/**
 * Posts as their reader sees them, the agents' names joined live (a rename relabels past posts) through
 * `names` (Auth's) in one call for the whole page.
 */
export const toPostRows = <E>(names: (ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyMap<string, string>, E>) =>
(caller: Caller, rows: ReadonlyArray<DbPostRow>): Effect.Effect<Array<PostRow>, E> =>
  Effect.map(
    names(rows.flatMap((r) => r.to_connection_id === null ? [r.connection_id] : [r.connection_id, r.to_connection_id])),
    (known) =>
      rows.map((row) =>
        toPostRow(
          caller,
          row,
          known.get(row.connection_id) ?? "",
          row.to_connection_id === null ? null : known.get(row.to_connection_id) ?? null
        )
      )
  )

/** A post as other services ask about it (a wait's predicate, a claim's source). */
export const PostRef = Schema.Struct({
  id: Schema.String,
  user_id: Schema.String,
  connection_id: Schema.String,
  kind: PostKindSchema,
  channel: Schema.String,
  channel_seq: DbInt
})
export type PostRef = typeof PostRef.Type
