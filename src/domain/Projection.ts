import { Schema } from "effect"

/**
 * Projections of list rows (`compact: true`, `fields: [...]`), one mechanism for every list-returning
 * read tool. A tool declares which key of its result holds the rows, the row Schema and the curated
 * compact keys (declared next to the row Schema); the dispatcher adds the arguments, refuses unknown
 * fields before the service runs, and projects the encoded rows.
 */
export interface ListProjection {
  /** the result key holding the rows, e.g. "posts" */
  readonly key: string
  readonly row: Schema.Struct<any>
  /** the curated ~5-key projection for `compact: true` */
  readonly compact: ReadonlyArray<string>
}

export const ProjectionArgs = Schema.Struct({
  compact: Schema.optional(Schema.Boolean).annotations({ description: "only the curated ~5 keys of each row" }),
  fields: Schema.optional(Schema.Array(Schema.String)).annotations({ description: "exactly these keys of each row" })
})
export type ProjectionArgs = typeof ProjectionArgs.Type

export const rowKeys = (projection: ListProjection): ReadonlyArray<string> => Object.keys(projection.row.fields)

/** The keys to keep, or undefined for whole rows; `unknown` lists requested keys the row does not have. */
export const selectKeys = (
  projection: ListProjection,
  args: ProjectionArgs
): { readonly keep: ReadonlyArray<string> | undefined; readonly unknown: ReadonlyArray<string> } => {
  const valid = new Set(rowKeys(projection))
  if (args.fields !== undefined) {
    const unknown = args.fields.filter((f) => !valid.has(f))
    return { keep: unknown.length > 0 ? undefined : [...new Set(args.fields)], unknown }
  }
  if (args.compact === true) return { keep: projection.compact, unknown: [] }
  return { keep: undefined, unknown: [] }
}

export const projectRows = (rows: ReadonlyArray<Record<string, unknown>>, keep: ReadonlyArray<string>) =>
  rows.map((row) => {
    const out: Record<string, unknown> = {}
    for (const k of keep) if (k in row) out[k] = row[k]
    return out
  })
