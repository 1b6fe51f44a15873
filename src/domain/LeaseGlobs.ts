import picomatch from "picomatch"

/**
 * What a lease resource names, and when two `path:` resources conflict. Pure and free of the library (the
 * git guard, `sophia guard check`, imports it and must start fast): picomatch and nothing else.
 *
 * A `path:<glob>` resource covers every path its glob matches (picomatch, `dot: true`, `nocase: true`); a glob
 * whose last segment is plain text (`src`, `src/`, `docs/guide.md`) may name a folder, so it also covers
 * everything below it (a lease on `src` holds the folder). Two `path:` resources conflict
 * when some path could be covered by both — decided conservatively (docs/architecture.md, "Leases"): a
 * false "no conflict" would let two agents edit one file, a false "conflict" only makes one wait. The rule:
 *
 * 1. Each glob is normalized (`./` and `.` segments dropped, `//` collapsed, a trailing `/` dropped; `..`
 *    and absolute paths are refused) and read as segments. From the first segment holding something this
 *    rule does not reason about — a brace `{`, an extglob or group `(`, a negation `!`, an escape `\`, a
 *    bracket that does not close within its segment, a `**` inside a longer segment — the rest of the glob
 *    is taken as `**` (anything below): a superset of what it matches.
 * 2. A glob that ends in plain text, or was cut short by step 1, gets a trailing `**` (what is below).
 * 3. Two segment lists overlap if some path matches both: `**` matches any number of segments (none
 *    included); two other segments overlap if some string matches both, where `*` is any run of characters
 *    (empty included), `?` and a bracket class any one character, and letters compare without case.
 *    This is exact for what step 1 keeps, so the only approximation is step 1's, and always towards
 *    "conflict".
 *
 * Lookup: every path a glob covers starts with the glob's base (its leading segments free of any special
 * character), so two overlapping globs have bases on one chain (one a segment-prefix of the other). The
 * store indexes bases in upper case (`baseKey`), the case-insensitive comparison's canonical form.
 *
 * The cost of being conservative: a plain path (`src/a.ts`) conflicts with any glob that could match below
 * it (one matching every `.md` file at any depth could match `src/a.ts/x.md`, were `src/a.ts` a folder);
 * globs ending in a pattern (`*.ts`, `**`) cover exactly what they match.
 */

export type ParsedResource =
  | { readonly kind: "path"; readonly glob: string; readonly resource: string }
  | { readonly kind: "slot"; readonly name: string; readonly resource: string }

const SPECIAL = /[*?[\]{}()!+@\\]/

/** A resource as written (`path:<glob>` or `slot:<name>`), normalized; a string saying what is wrong otherwise. */
export const parseResource = (text: string): ParsedResource | string => {
  if (text.startsWith("slot:")) {
    const name = text.slice(5).trim()
    if (name === "") return `${JSON.stringify(text)}: a slot needs a name (slot:<name>)`
    return { kind: "slot", name, resource: `slot:${name}` }
  }
  if (!text.startsWith("path:")) return `${JSON.stringify(text)}: a resource is path:<glob> or slot:<name>`
  const raw = text.slice(5).trim()
  if (raw.startsWith("/")) return `${JSON.stringify(text)}: path globs are relative to the project's root (no leading /)`
  const segments = raw.split("/").filter((s) => s !== "" && s !== ".")
  if (segments.some((s) => s === "..")) return `${JSON.stringify(text)}: path globs stay inside the project (no ..)`
  if (segments.length === 0) return `${JSON.stringify(text)}: an empty path glob (use path:** for the whole project)`
  const glob = segments.join("/")
  return { kind: "path", glob, resource: `path:${glob}` }
}

/** The canonical form of text compared without case (what the store indexes). */
export const foldCase = (s: string): string => s.toUpperCase()

/** The glob's leading segments free of any special character, case-folded ("" when the first is special). */
export const baseKey = (glob: string): string => {
  const out: Array<string> = []
  for (const segment of glob.split("/")) {
    if (SPECIAL.test(segment)) break
    out.push(segment)
  }
  return foldCase(out.join("/"))
}

/** A base and every segment-prefix of it, "" included (the bases a conflicting glob's base could be). */
export const ancestorKeys = (key: string): Array<string> => {
  if (key === "") return [""]
  const parts = key.split("/")
  return ["", ...parts.map((_, i) => parts.slice(0, i + 1).join("/"))]
}

// ---------------------------------------------------------------- overlap

type Token = { readonly t: "lit"; readonly c: string } | { readonly t: "one" } | { readonly t: "star" }
type Segment = { readonly t: "globstar" } | { readonly t: "seg"; readonly tokens: ReadonlyArray<Token> }

/** A segment as tokens, or undefined when it holds something the rule does not reason about. */
const tokenize = (segment: string): ReadonlyArray<Token> | undefined => {
  if (segment.includes("**")) return undefined
  const chars = Array.from(segment)
  const tokens: Array<Token> = []
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]
    if (c === "*") tokens.push({ t: "star" })
    else if (c === "?") tokens.push({ t: "one" })
    else if (c === "[") {
      const close = chars.indexOf("]", i + 2)
      if (close < 0) return undefined
      tokens.push({ t: "one" })
      i = close
    } else if (/[\]{}()!+@\\]/.test(c)) return undefined
    else tokens.push({ t: "lit", c })
  }
  return tokens
}

/** Whether a glob may name a folder: its last segment is plain text (it then covers what is below it). */
const endsPlain = (glob: string) => !SPECIAL.test(glob.slice(glob.lastIndexOf("/") + 1))

/** The glob as segments, simplified as step 1 says, with the trailing `**` of step 2. */
const segmentsOf = (glob: string): ReadonlyArray<Segment> => {
  const out: Array<Segment> = []
  let cut = false
  for (const raw of glob.split("/")) {
    if (raw === "**") {
      out.push({ t: "globstar" })
      continue
    }
    const tokens = tokenize(raw)
    if (tokens === undefined) {
      cut = true
      break
    }
    out.push({ t: "seg", tokens })
  }
  if (cut || endsPlain(glob)) out.push({ t: "globstar" })
  return out
}

const sameLetter = (a: string, b: string) => a === b || a.toUpperCase() === b.toUpperCase() || a.toLowerCase() === b.toLowerCase()

/**
 * Whether one sequence matches both patterns `a` and `b`, where a `wild` element stands for any run of
 * elements (none included) and two other elements `meet` when some element matches both: the memoized walk
 * both overlaps below share (characters within a segment, segments within a path).
 */
const sequencesOverlap = <T>(
  a: ReadonlyArray<T>,
  b: ReadonlyArray<T>,
  wild: (x: T) => boolean,
  meet: (x: T, y: T) => boolean
): boolean => {
  const memo = new Map<number, boolean>()
  const go = (i: number, j: number): boolean => {
    const key = i * (b.length + 1) + j
    const known = memo.get(key)
    if (known !== undefined) return known
    let r: boolean
    if (i === a.length && j === b.length) r = true
    else if (i < a.length && wild(a[i])) r = go(i + 1, j) || (j < b.length && go(i, j + 1))
    else if (j < b.length && wild(b[j])) r = go(i, j + 1) || (i < a.length && go(i + 1, j))
    else if (i === a.length || j === b.length) r = false
    else r = meet(a[i], b[j]) && go(i + 1, j + 1)
    memo.set(key, r)
    return r
  }
  return go(0, 0)
}

/** Whether some string matches both token lists. */
const tokensOverlap = (a: ReadonlyArray<Token>, b: ReadonlyArray<Token>): boolean =>
  sequencesOverlap(a, b, (x) => x.t === "star", (x, y) => x.t !== "lit" || y.t !== "lit" || sameLetter(x.c, y.c))

/** Whether some path matches both segment lists. */
const segmentsOverlap = (a: ReadonlyArray<Segment>, b: ReadonlyArray<Segment>): boolean =>
  sequencesOverlap(
    a,
    b,
    (x) => x.t === "globstar",
    (x, y) => tokensOverlap((x as Extract<Segment, { t: "seg" }>).tokens, (y as Extract<Segment, { t: "seg" }>).tokens)
  )

/** Whether two normalized globs could cover one path (conservative: see the rule above). */
export const globsOverlap = (a: string, b: string): boolean => segmentsOverlap(segmentsOf(a), segmentsOf(b))

// ---------------------------------------------------------------- covering (the guard)

const OPTIONS = { dot: true, nocase: true } as const

/**
 * A matcher of the paths a normalized glob covers: those it matches, and everything below them when it ends
 * in plain text. What the guard asks of each staged path.
 */
export const coverer = (glob: string): ((path: string) => boolean) => {
  const match = picomatch(glob, OPTIONS)
  const below = endsPlain(glob)
  return (path) => {
    const parts = path.split("/").filter((s) => s !== "" && s !== ".")
    if (!below) return match(parts.join("/"))
    for (let n = parts.length; n > 0; n--) if (match(parts.slice(0, n).join("/"))) return true
    return false
  }
}
