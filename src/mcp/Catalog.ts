import canonicalize from "canonicalize"
import { Config, Effect, Option } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Caller } from "../domain/Auth.js"
import type { CatalogInput, CatalogOutput, CatalogTool, SdkTypesOutput } from "../domain/Catalog.js"
import { NotFound } from "../domain/Errors.js"
import { LEDGER_CONTRACT_HASH } from "../domain/Ledger.js"
import { nearest } from "../domain/Names.js"
import type { Registry, Tool } from "./Registry.js"
import { spanned } from "../services/Spans.js"
import { generateDeclarations } from "./SdkTypes.js"

type Profile = Caller["profile"]

/** The npm name of this package (its root is found by it: see `packageRootOf`). */
const PACKAGE_NAME = "@sophia-mcp/server"

/** How many hex digits of the commit `server_git_sha` shows (as in `git log --oneline`). */
const SHORT_SHA = 8

const readText = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

/**
 * The commit of a git checkout whose root is `dir` (`dir/.git`: a directory, or a worktree's `gitdir:`
 * file), HEAD resolved through loose or packed refs. Only `dir` itself is looked at, never a folder above
 * it: a package installed inside another repository must not report that repository's commit.
 * No `git` binary needed; undefined when `dir` is no checkout's root.
 */
export const gitShaOf = (dir: string): string | undefined => {
  const dotGit = path.join(dir, ".git")
  if (!fs.existsSync(dotGit)) return undefined
  let gitDir = dotGit
  if (fs.statSync(dotGit).isFile()) {
    const m = /^gitdir:\s*(.+)\s*$/m.exec(readText(dotGit) ?? "")
    if (!m) return undefined
    gitDir = path.resolve(dir, m[1])
  }
  const commonRel = readText(path.join(gitDir, "commondir"))?.trim()
  const commonDir = commonRel ? path.resolve(gitDir, commonRel) : gitDir
  const head = readText(path.join(gitDir, "HEAD"))?.trim()
  if (!head) return undefined
  if (/^[0-9a-f]{40,64}$/.test(head)) return head
  const ref = /^ref:\s*(\S+)$/.exec(head)?.[1]
  if (!ref) return undefined
  for (const base of [gitDir, commonDir]) {
    const loose = readText(path.join(base, ref))?.trim()
    if (loose && /^[0-9a-f]{40,64}$/.test(loose)) return loose
  }
  const packed = readText(path.join(commonDir, "packed-refs")) ?? ""
  for (const line of packed.split("\n")) {
    const [sha, name] = line.trim().split(" ")
    if (name === ref && /^[0-9a-f]{40,64}$/.test(sha)) return sha
  }
  return undefined
}

/** This package's own root: the nearest folder above `start` whose package.json is this package's. */
export const packageRootOf = (start: string): string | undefined => {
  for (let dir = start; ; dir = path.dirname(dir)) {
    const manifest = readText(path.join(dir, "package.json"))
    if (manifest !== undefined) {
      try {
        if ((JSON.parse(manifest) as { name?: unknown }).name === PACKAGE_NAME) return dir
      } catch {
        // not JSON: not ours; keep looking above
      }
    }
    if (path.dirname(dir) === dir) return undefined
  }
}

/**
 * The commit this code was built from, read only from this package itself: its checkout (running from a
 * clone) or the build's record (`dist/build-info.json`, written by scripts/build.mjs; an installed package).
 */
export const buildShaOf = (start: string): string | undefined => {
  const root = packageRootOf(start)
  if (root === undefined) return undefined
  const checkout = gitShaOf(root)
  if (checkout !== undefined) return checkout
  try {
    const sha = (JSON.parse(readText(path.join(root, "dist", "build-info.json")) ?? "{}") as { git_sha?: unknown }).git_sha
    return typeof sha === "string" && /^[0-9a-f]{40,64}$/.test(sha) ? sha : undefined
  } catch {
    return undefined
  }
}

/** What the version hash covers: exactly the names, schemas, access classes and annotations. */
const surfaceOf = (registry: Registry, tools: ReadonlyArray<Tool>) =>
  tools.map((t) => ({
    name: t.name,
    access: t.access,
    annotations: t.annotations,
    input: registry.inputJsonSchema(t),
    output: registry.outputJsonSchema(t)
  }))

/** SHA-256 (hex) of the RFC 8785 canonical JSON of a surface. */
export const surfaceHash = (registry: Registry, tools: ReadonlyArray<Tool>): string =>
  createHash("sha256").update(canonicalize(surfaceOf(registry, tools)) ?? "").digest("hex")

/** The tools a profile is advertised: exactly `tools/list` (registry.listFor), in registry order. */
export const advertisedTools = (registry: Registry, profile: Profile): ReadonlyArray<Tool> =>
  registry.listFor(profile, "dotted").flatMap((listed) => Option.toArray(registry.lookup(listed.name)))

interface ProfileView {
  readonly tools: ReadonlyArray<Tool>
  readonly versionHash: string
  declarations?: string
}

/**
 * The self-description of the tool surface, derived from the registry on every call (no hand-kept list):
 * `capability_catalog` (tools grouped by capability, with access, annotations, schemas, a version hash of
 * the surface and the build's git commit) and `get_sdk_types` (generated TypeScript declarations).
 * What a caller sees is what its profile may call, the same filter as `tools/list`.
 */
export class Catalog extends Effect.Service<Catalog>()("sophia/Catalog", {
  effect: Effect.gen(function*() {
    const configured = yield* Config.option(Config.string("SOPHIA_GIT_SHA"))
    const here = path.dirname(fileURLToPath(import.meta.url))
    const fullSha = Option.getOrUndefined(configured) ?? buildShaOf(here)
    const serverGitSha = fullSha ? fullSha.slice(0, SHORT_SHA) : "unknown"

    // a registry never changes once built; derived views are cached per registry and profile
    const views = new WeakMap<Registry, Map<Profile, ProfileView>>()
    const viewOf = (registry: Registry, profile: Profile): ProfileView => {
      let byProfile = views.get(registry)
      if (!byProfile) views.set(registry, byProfile = new Map())
      let view = byProfile.get(profile)
      if (!view) {
        const tools = advertisedTools(registry, profile)
        byProfile.set(profile, view = { tools, versionHash: surfaceHash(registry, tools) })
      }
      return view
    }

    const describe = spanned("Catalog.describe", Effect.fnUntraced(function*(registry: Registry, caller: Caller, input: CatalogInput) {
      const view = viewOf(registry, caller.profile)
      const groups: Record<string, Array<CatalogTool>> = {}
      for (const tool of view.tools) {
        if (input.group !== undefined && tool.group !== input.group) continue
        ;(groups[tool.group] ??= []).push({
          name: tool.name,
          description: tool.description,
          access: tool.access,
          annotations: tool.annotations,
          ...(input.brief === true
            ? {}
            : { input_schema: registry.inputJsonSchema(tool), output_schema: registry.outputJsonSchema(tool) })
        })
      }
      if (input.group !== undefined && groups[input.group] === undefined) {
        const known = new Set(view.tools.map((t) => t.group))
        return yield* new NotFound({ what: "capability group", id: input.group, suggestions: nearest(input.group, known) })
      }
      return {
        groups,
        total_tools: view.tools.length,
        version_hash: view.versionHash,
        server_git_sha: serverGitSha,
        ledger_contract_hash: LEDGER_CONTRACT_HASH
      } satisfies CatalogOutput
    }))

    const sdkTypes = spanned("Catalog.sdkTypes", Effect.fnUntraced(function*(registry: Registry, caller: Caller) {
      const view = viewOf(registry, caller.profile)
      view.declarations ??= generateDeclarations(registry, view.tools)
      return { declarations: view.declarations, version_hash: view.versionHash } satisfies SdkTypesOutput
    }))

    /** The version hash of what `profile` is advertised. */
    const versionHash = (registry: Registry, profile: Profile) => viewOf(registry, profile).versionHash

    /** The catalog's headline for a session bootstrap (`sophia.orient`): no groups, no schemas. */
    const summary = (registry: Registry, profile: Profile) => {
      const view = viewOf(registry, profile)
      return { total_tools: view.tools.length, version_hash: view.versionHash, server_git_sha: serverGitSha } as const
    }

    return { describe, sdkTypes, versionHash, summary, serverGitSha } as const
  })
}) {}
