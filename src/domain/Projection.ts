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
  /**
   * `compact: true` is a skim view: these text keys are cut to a preview of at most N characters
   * (ending in "…"). `fields: [...]` always returns exact, whole values.
   */
  readonly compactPreview?: { readonly [key: string]: number }
}

export const ProjectionArgs = Schema.Struct({
  compact: Schema.optional(Schema.Boolean).annotations({ description: "~5 keys per row, text cut" }),
  fields: Schema.optional(Schema.Array(Schema.String)).annotations({ description: "only these row keys" })
})
export type ProjectionArgs = typeof ProjectionArgs.Type

export const rowKeys = (projection: ListProjection): ReadonlyArray<string> => Object.keys(projection.row.fields)

/** The keys to keep, or undefined for whole rows; `unknown` lists requested keys the row does not have. */
export const selectKeys = (
  projection: ListProjection,
  args: ProjectionArgs
): {
  readonly keep: ReadonlyArray<string> | undefined
  readonly unknown: ReadonlyArray<string>
  readonly preview?: { readonly [key: string]: number } | undefined
} => {
  const valid = new Set(rowKeys(projection))
  if (args.fields !== undefined) {
    const unknown = args.fields.filter((f) => !valid.has(f))
    return { keep: unknown.length > 0 ? undefined : [...new Set(args.fields)], unknown }
  }
  if (args.compact === true) return { keep: projection.compact, unknown: [], preview: projection.compactPreview }
  return { keep: undefined, unknown: [] }
}

export const projectRows = (
  rows: ReadonlyArray<Record<string, unknown>>,
  keep: ReadonlyArray<string>,
  preview?: { readonly [key: string]: number }
) =>
  rows.map((row) => {
    const out: Record<string, unknown> = {}
    for (const k of keep) {
      if (!(k in row)) continue
      const value = row[k]
      const max = preview?.[k]
      out[k] = max !== undefined && typeof value === "string" && value.length > max ? value.slice(0, max - 1) + "…" : value
    }
    return out
  })
