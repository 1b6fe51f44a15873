import { ParseResult } from "effect"
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

/** `path: message; …` for a decode failure, short whatever the input. */
export const formatParseError = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatIssueSync(withPreviews(error.issue))
  const listed = issues.slice(0, MAX_ISSUES).map((i) => `${formatPath(i.path.map((k) => (typeof k === "symbol" ? String(k) : k)), "arguments")}: ${i.message}`)
  if (issues.length > MAX_ISSUES) listed.push(`… and ${issues.length - MAX_ISSUES} more`)
  return listed.join("; ")
}
