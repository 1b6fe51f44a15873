import { Effect } from "effect"
import { transform } from "esbuild"
import { SandboxError } from "../../domain/Sandbox.js"
import type { DecodedMappings } from "../../sandbox/SourceMap.js"
import { decodeMappings, originalPosition } from "../../sandbox/SourceMap.js"

/** A snippet ready for an isolate: its JavaScript, and the map back to the lines the agent wrote. */
export interface Compiled {
  readonly js: string
  readonly mappings: DecodedMappings
}

const WRAPPER = "async function __sophia_snippet__() {\n"
const COMPILE_CACHE_ENTRIES = 256

/** TypeScript → JavaScript (types stripped) as the body of an async function, with a map back to the snippet's lines. */
const compile = (code: string): Effect.Effect<Compiled, SandboxError> =>
  Effect.tryPromise({
    try: () => transform(`${WRAPPER}${code}\n}`, { loader: "ts", sourcemap: "external", sourcefile: "snippet.ts" }),
    catch: (e) => {
      const errors = (e as { errors?: Array<{ text: string; location?: { line: number; column: number } | null }> }).errors ?? []
      const first = errors[0]
      const where = first?.location ? `snippet.ts:${first.location.line - 1}:${first.location.column + 1}: ` : ""
      return new SandboxError({
        detail: `the snippet does not compile: ${where}${first?.text ?? String(e)}`,
        error_name: "SyntaxError"
      })
    }
  }).pipe(
    Effect.map((out) => ({ js: out.code, mappings: decodeMappings((JSON.parse(out.map) as { mappings: string }).mappings) }))
  )

/**
 * `compile`, with the last COMPILE_CACHE_ENTRIES snippets kept by source, least recently used first out
 * (agents re-run the same snippet; esbuild is the costliest step of a warm run).
 */
export const makeCompiler = () => {
  const cache = new Map<string, Compiled>()
  return (code: string): Effect.Effect<Compiled, SandboxError> =>
    Effect.suspend(() => {
      const hit = cache.get(code)
      if (hit) {
        cache.delete(code)
        cache.set(code, hit)
        return Effect.succeed(hit)
      }
      return Effect.tap(compile(code), (c) =>
        Effect.sync(() => {
          cache.set(code, c)
          if (cache.size > COMPILE_CACHE_ENTRIES) cache.delete(cache.keys().next().value!)
        }))
    })
}

/** The agent's frames only, each `snippet.js:L:C` mapped to `snippet.ts:L:C` of the code it sent. */
export const mapStack = (stack: string, mappings: DecodedMappings): string => {
  const lines = stack.split("\n")
  const head = lines[0] ?? ""
  const frames = lines.slice(1).flatMap((line) => {
    const m = /snippet\.js:(\d+):(\d+)/.exec(line)
    if (!m) return []
    const pos = originalPosition(mappings, Number(m[1]), Number(m[2]))
    if (!pos || pos.line < 1) return []
    return [line.replace(m[0], `snippet.ts:${pos.line}:${pos.column + 1}`).replace("__sophia_snippet__", "<snippet>")]
  })
  return [head, ...frames].join("\n")
}
