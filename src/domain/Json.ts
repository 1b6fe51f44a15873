import { Schema } from "effect"

/**
 * Free-form JSON as agents send it (docs/architecture.md, "Limits"): every free-form value — a post's payload, a
 * ledger `value`, the arguments an approval binds — is nested at most 16 deep and holds only well-formed
 * Unicode, checked when it is decoded, so that hashing (RFC 8785), verifying and replaying it can never
 * fail later. Every walk here is iterative: no input, however deep, can overflow the call stack.
 */

/** The deepest a free-form JSON value may nest: a scalar is 0 deep, `[]` and `{}` are 1. */
export const JSON_MAX_DEPTH = 16

/**
 * The deepest a tool's whole arguments may nest: a tool's own structure around a free-form value (the
 * ledger's `events[i].value` sits 3 deep) plus the value's 16. Calls bound by an approval: `JSON_MAX_DEPTH`.
 */
export const ARGUMENTS_MAX_DEPTH = 2 * JSON_MAX_DEPTH

export type JsonPath = ReadonlyArray<string | number>

/** What is wrong with a value, and where (a path from the value's root). */
export interface JsonIssue {
  readonly path: JsonPath
  readonly message: string
}

/** A lone surrogate: `\p{Cs}` in a `u` regex matches only unpaired halves (a pair is one code point). */
const LONE_SURROGATE = /\p{Cs}/u

export const isWellFormed = (text: string): boolean => !LONE_SURROGATE.test(text)

const LONE_SURROGATES = /\p{Cs}/gu
const SEGMENT_MAX = 64

/** A path segment fit for a message: well-formed (U+FFFD for a lone surrogate) and short. */
const segment = (key: string | number): string => {
  if (typeof key === "number") return String(key)
  const text = key.length > SEGMENT_MAX ? key.slice(0, SEGMENT_MAX) + "…" : key
  return text.replace(LONE_SURROGATES, "\uFFFD")
}

/** `a.b.0.c`, as Effect's ArrayFormatter writes paths; `prefix` names the root when the path is empty. */
export const formatPath = (path: JsonPath, prefix = ""): string => path.length === 0 ? prefix : path.map(segment).join(".")

const kindOf = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : `a ${typeof value}`

const isPlainObject = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

interface Frame {
  readonly value: unknown
  readonly depth: number
  readonly key: string | number | undefined
  readonly parent: Frame | undefined
}

const pathOf = (frame: Frame | undefined): Array<string | number> => {
  const path: Array<string | number> = []
  for (let f = frame; f !== undefined && f.key !== undefined; f = f.parent) path.push(f.key)
  return path.reverse()
}

/**
 * The first thing that keeps `value` from being free-form JSON within the limits, or `undefined`:
 * a type JSON cannot carry (non-finite numbers, functions, class instances…), nesting deeper than
 * `maxDepth`, or a string or key holding a lone surrogate. `undefined` members are allowed (JSON drops
 * them). Iterative, depth-first, and it stops at the limit, so a cycle or a million-deep value costs at
 * most `maxDepth` levels of work per branch.
 */
export const checkJson = (value: unknown, maxDepth: number = JSON_MAX_DEPTH): JsonIssue | undefined => {
  const stack: Array<Frame> = [{ value, depth: 0, key: undefined, parent: undefined }]
  while (stack.length > 0) {
    const frame = stack.pop()!
    const v = frame.value
    switch (typeof v) {
      case "string":
        if (!isWellFormed(v)) return { path: pathOf(frame), message: "holds a lone surrogate; text must be well-formed Unicode" }
        continue
      case "number":
        if (!Number.isFinite(v)) return { path: pathOf(frame), message: `${v} is not a JSON number` }
        continue
      case "boolean":
      case "undefined":
        continue
      case "object": {
        if (v === null) continue
        const depth = frame.depth + 1
        if (depth > maxDepth) return { path: pathOf(frame), message: `nests deeper than ${maxDepth} levels` }
        if (Array.isArray(v)) {
          for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], depth, key: i, parent: frame })
          continue
        }
        if (!isPlainObject(v)) return { path: pathOf(frame), message: "is not JSON (not a plain object)" }
        const keys = Object.keys(v)
        for (let i = keys.length - 1; i >= 0; i--) {
          const key = keys[i]
          if (!isWellFormed(key)) {
            return { path: pathOf(frame).concat(key), message: "is a key holding a lone surrogate; text must be well-formed Unicode" }
          }
          stack.push({ value: (v as Record<string, unknown>)[key], depth, key, parent: frame })
        }
        continue
      }
      default:
        return { path: pathOf(frame), message: `is not JSON (${typeof v})` }
    }
  }
  return undefined
}

/**
 * A tool's arguments as a whole: a JSON object (no arguments at all counts as `{}`), well-formed
 * everywhere, nested at most `maxDepth`. Checked before the tool's own Schema decodes them, so neither the
 * decoder, nor its refusal message, nor an approval's hash ever walks a hostile shape.
 */
export const checkArguments = (args: unknown, maxDepth: number = ARGUMENTS_MAX_DEPTH): JsonIssue | undefined => {
  if (args === undefined) return undefined
  if (typeof args !== "object" || args === null || Array.isArray(args)) {
    return { path: [], message: `must be a JSON object, not ${kindOf(args)}` }
  }
  const issue = checkJson(args, maxDepth)
  return issue && maxDepth > JSON_MAX_DEPTH && issue.message.startsWith("nests deeper")
    ? { path: issue.path, message: `${issue.message} (a free-form JSON value: at most ${JSON_MAX_DEPTH})` }
    : issue
}

/** `path: message`, the form of every `validation_error` (the root is called `root`). */
export const formatJsonIssue = (issue: JsonIssue, root = "arguments"): string =>
  `${formatPath(issue.path, root)}: ${issue.message}`

const filterOf = (maxDepth: number) => (value: unknown) => {
  const issue = checkJson(value, maxDepth)
  return issue === undefined ? true : { path: issue.path, message: issue.message }
}

/**
 * Any JSON value within the limits: the Schema of every free-form field agents send. Its JSON Schema is
 * `{}`, like `Schema.Unknown` (the limits are docs/architecture.md's "Limits", not repeated in every tool's schema).
 */
export const JsonValue: Schema.Schema<unknown> = Schema.Unknown.pipe(
  // a missing key decodes as `undefined`, which canonical JSON cannot hold: the value is required
  Schema.filter((value) => value === undefined ? "is missing" : filterOf(JSON_MAX_DEPTH)(value), { jsonSchema: {} })
)

/** A JSON object within the limits (the object itself is the first level). */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).pipe(
  Schema.filter(filterOf(JSON_MAX_DEPTH), { jsonSchema: {} })
)

/** The first `n` UTF-16 units of `text`, never ending in half a surrogate pair. */
const cut = (text: string, n: number): string => {
  if (text.length <= n) return text
  const code = text.charCodeAt(n - 1)
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? n - 1 : n)
}

/**
 * A short, single-line preview of any value for a message: compact JSON cut at `budget` characters.
 * Iterative and bounded by `budget`, whatever the value's depth, width or length (or cycles).
 */
export const previewJson = (value: unknown, budget = 60): string => {
  type Open =
    | { readonly kind: "array"; readonly items: ReadonlyArray<unknown>; i: number }
    | { readonly kind: "object"; readonly obj: Record<string, unknown>; readonly keys: ReadonlyArray<string>; i: number }
  const stack: Array<Open> = []
  let out = ""
  let next: { value: unknown } | undefined = { value }
  const scalar = (v: unknown): string => {
    if (typeof v === "string") {
      const head = cut(v, budget)
      return JSON.stringify(head) + (head.length < v.length ? "…" : "")
    }
    if (typeof v === "bigint") return `${v}n`
    if (typeof v === "function") return "function"
    if (typeof v === "symbol") return "symbol"
    return String(v)
  }
  while (out.length < budget) {
    if (next !== undefined) {
      const v = next.value
      next = undefined
      if (Array.isArray(v)) {
        out += "["
        stack.push({ kind: "array", items: v, i: 0 })
      } else if (typeof v === "object" && v !== null) {
        out += "{"
        stack.push({ kind: "object", obj: v as Record<string, unknown>, keys: Object.keys(v), i: 0 })
      } else {
        out += scalar(v)
      }
      continue
    }
    const top = stack[stack.length - 1]
    if (top === undefined) return out
    if (top.kind === "array") {
      if (top.i >= top.items.length) {
        out += "]"
        stack.pop()
        continue
      }
      if (top.i > 0) out += ","
      next = { value: top.items[top.i++] }
    } else {
      if (top.i >= top.keys.length) {
        out += "}"
        stack.pop()
        continue
      }
      if (top.i > 0) out += ","
      const key = top.keys[top.i++]
      out += scalar(key) + ":"
      next = { value: top.obj[key] }
    }
  }
  return stack.length === 0 && next === undefined && out.length <= budget ? out : cut(out, budget) + "…"
}
