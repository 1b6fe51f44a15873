import { ParseResult, SchemaAST } from "effect"
import { formatPath, previewJson } from "../domain/Json.js"

/**
 * The message of a `validation_error` from a Schema decode failure: `path: message; …`, as Effect's
 * ArrayFormatter writes it, except that the formatter never sees the offending values themselves. Effect
 * prints `actual` in full and recursively (a 3,000-deep argument overflowed the stack, a 1 MB string
 * became a 1 MB message); here every `actual` is replaced by a short preview first. The walk follows the
 * issue tree, whose depth is the Schema's, never the value's.
 */

/** Stands in for a value: Effect's formatter prints a value with its own `toString` as that string. */
class Preview {
  constructor(readonly text: string) {}
  toString() {
    return this.text
  }
}

const preview = (actual: unknown) => new Preview(previewJson(actual))

const withPreviews = (issue: ParseResult.ParseIssue): ParseResult.ParseIssue => {
  switch (issue._tag) {
    case "Type":
      return new ParseResult.Type(issue.ast, preview(issue.actual), issue.message)
    case "Missing":
      return issue
    case "Unexpected":
      return new ParseResult.Unexpected(preview(issue.actual), issue.message)
    case "Forbidden":
      return new ParseResult.Forbidden(issue.ast, preview(issue.actual), issue.message)
    case "Pointer":
      return new ParseResult.Pointer(issue.path, preview(issue.actual), withPreviews(issue.issue))
    case "Refinement":
      return new ParseResult.Refinement(issue.ast, preview(issue.actual), issue.kind, withPreviews(issue.issue))
    case "Transformation":
      return new ParseResult.Transformation(issue.ast, preview(issue.actual), issue.kind, withPreviews(issue.issue))
    case "Composite": {
      const issues = Array.isArray(issue.issues)
        ? (issue.issues.map(withPreviews) as unknown as ParseResult.SingleOrNonEmpty<ParseResult.ParseIssue>)
        : withPreviews(issue.issues as ParseResult.ParseIssue)
      return new ParseResult.Composite(issue.ast, preview(issue.actual), issues)
    }
  }
}

/** At most this many issues are listed; the rest are counted. */
const MAX_ISSUES = 10
/** An expected type longer than this is not spelled out: the tool's input schema says it. */
const MAX_EXPECTED = 100

type Key = PropertyKey
const keyOf = (path: ReadonlyArray<Key>) => path.map(String).join("\u0000")

/** What a property is for, as its schema describes it (on the property or on its type). */
const describedAs = (owner: SchemaAST.AST | undefined, name: Key): string | undefined => {
  if (owner === undefined || owner._tag !== "TypeLiteral") return undefined
  const property = owner.propertySignatures.find((p) => p.name === name)
  if (property === undefined) return undefined
  const own = SchemaAST.getDescriptionAnnotation(property)
  if (own._tag === "Some") return own.value
  const ofType = SchemaAST.getDescriptionAnnotation(property.type)
  return ofType._tag === "Some" ? ofType.value : undefined
}

/** The description of each missing key, by path (what the key is for says what to send). */
const missingDescriptions = (
  issue: ParseResult.ParseIssue,
  path: ReadonlyArray<Key> = [],
  owner: SchemaAST.AST | undefined = undefined,
  found = new Map<string, string>()
) => {
  switch (issue._tag) {
    case "Pointer": {
      const at = Array.isArray(issue.path) ? issue.path : [issue.path]
      if (issue.issue._tag === "Missing" && at.length === 1) {
        const description = describedAs(owner, at[0])
        if (description !== undefined) found.set(keyOf([...path, ...at]), description)
      }
      missingDescriptions(issue.issue, [...path, ...at], undefined, found)
      break
    }
    case "Refinement":
    case "Transformation":
      missingDescriptions(issue.issue, path, issue.ast, found)
      break
    case "Composite":
      for (const inner of Array.isArray(issue.issues) ? issue.issues : [issue.issues]) {
        missingDescriptions(inner as ParseResult.ParseIssue, path, issue.ast, found)
      }
      break
  }
  return found
}

const LITERAL = /^Expected ("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?|true|false|null), actual (.*)$/s
const EXPECTED = /^Expected (.*), actual (.*)$/s

/**
 * One message per argument: the alternatives of a union said once (`must be one of …`), the optional's
 * "Expected undefined" dropped beside the real complaint, a long type not spelled out, a missing key told
 * what it is for.
 */
const sayOnce = (messages: ReadonlyArray<string>, missing: string | undefined): string => {
  const real = messages.length > 1 ? messages.filter((m) => !/^Expected undefined, actual /.test(m)) : messages
  const literals = real.map((m) => LITERAL.exec(m))
  if (real.length > 1 && literals.every((m) => m !== null)) {
    return `must be one of ${literals.map((m) => m![1]).join(", ")}; got ${literals[0]![2]}`
  }
  const said = real.map((m) => {
    if (m === "is missing" && missing !== undefined) return `is missing: ${missing}`
    const expected = EXPECTED.exec(m)
    if (expected !== null && expected[1].length > MAX_EXPECTED) {
      return `is not of the expected shape (got ${expected[2]}); this tool's input schema (sophia.capability_catalog) spells it out`
    }
    return m
  })
  return [...new Set(said)].join("; ")
}

/** `path: message; …` for a decode failure, short whatever the input, one message per argument. */
export const formatParseError = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatIssueSync(withPreviews(error.issue))
  const missing = missingDescriptions(error.issue)
  const byPath = new Map<string, { readonly path: ReadonlyArray<Key>; readonly messages: Array<string> }>()
  for (const issue of issues) {
    const key = keyOf(issue.path)
    const group = byPath.get(key)
    if (group === undefined) byPath.set(key, { path: issue.path, messages: [issue.message] })
    else group.messages.push(issue.message)
  }
  const groups = [...byPath.entries()]
  const listed = groups.slice(0, MAX_ISSUES).map(([key, { messages, path }]) =>
    `${formatPath(path.map((k) => (typeof k === "symbol" ? String(k) : k)), "arguments")}: ${sayOnce(messages, missing.get(key))}`
  )
  if (groups.length > MAX_ISSUES) listed.push(`… and ${groups.length - MAX_ISSUES} more`)
  return listed.join("; ")
}
