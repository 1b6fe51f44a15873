/** A tiny HTML template: every interpolation is escaped unless it is already `Html` (no raw strings slip in). */
export class Html {
  constructor(readonly text: string) {}
  toString() {
    return this.text
  }
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }
export const escape = (value: string): string => value.replace(/[&<>"']/g, (c) => ESCAPES[c])

type Part = Html | string | number | boolean | null | undefined | ReadonlyArray<Part>
const render = (part: Part): string => {
  if (part === null || part === undefined || part === false) return ""
  if (part instanceof Html) return part.text
  if (Array.isArray(part)) return part.map(render).join("")
  return escape(String(part))
}

export const html = (strings: TemplateStringsArray, ...values: ReadonlyArray<Part>): Html => {
  let out = strings[0]
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]
  return new Html(out)
}

/** Pretty JSON for a `<pre>` (escaped by the template). */
export const json = (value: unknown): string => JSON.stringify(value, null, 2) ?? "null"
