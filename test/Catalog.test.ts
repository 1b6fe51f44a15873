import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Layer, Runtime, Schema } from "effect"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { decideAccess } from "../src/domain/Access.js"
import type { AccessClass, Caller } from "../src/domain/Auth.js"
import { ACCESS_CLASSES } from "../src/domain/Auth.js"
import { LEDGER_CONTRACT_HASH } from "../src/domain/Ledger.js"
import { allToolSets, makeCore, RegistryLive, SophiaTest } from "../src/layers/App.js"
import { SqliteLive } from "../src/layers/Sql.js"
import { Dispatcher } from "../src/mcp/Dispatch.js"
import { makeMcpServer } from "../src/mcp/McpServer.js"
import type { Tool } from "../src/mcp/Registry.js"
import { APPEND_ONLY, defineTool, makeRegistry, READ_ONLY, ToolRegistry } from "../src/mcp/Registry.js"
import { slimJsonSchema, toJsonSchema } from "../src/mcp/JsonSchema.js"
import { buildShaOf, Catalog, gitShaOf, surfaceHash } from "../src/mcp/Catalog.js"
import { connect } from "./support/Fixtures.js"

type CatalogBody = {
  groups: Record<string, Array<{ name: string; access: AccessClass; input_schema?: object; output_schema?: object }>>
  total_tools: number
  version_hash: string
  server_git_sha: string
  ledger_contract_hash: string
}

const probe = (access: AccessClass, name = `sophia.probe_${access}`) =>
  defineTool({
    name: name as `sophia.${string}`,
    group: `probe_${access === "read" ? "read" : "mutate"}`,
    access,
    description: `probe of class ${access}`,
    annotations: access === "read" ? READ_ONLY : APPEND_ONLY,
    input: Schema.Struct({ n: Schema.optional(Schema.Number) }),
    output: Schema.Struct({ ok: Schema.Boolean }),
    handler: () => Effect.succeed({ ok: true })
  })

/** The live surface plus one throwaway tool per access class, so the profile filter has something to hide. */
const probes = ACCESS_CLASSES.map((a) => probe(a))
const ProbedApp = makeCore(
  SqliteLive(":memory:"),
  ToolRegistry.fromToolSets<Layer.Layer.Context<typeof RegistryLive>>(...allToolSets, Effect.succeed(probes))
)

const catalogOf = (caller: Caller, args: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const dispatcher = yield* Dispatcher
    const outcome = yield* dispatcher.call(caller, "sophia.capability_catalog", args)
    assert.isTrue(outcome.ok, JSON.stringify(outcome.body))
    return outcome.body as unknown as CatalogBody
  })

const namesIn = (body: CatalogBody) => Object.values(body.groups).flat().map((t) => t.name)

describe("capability_catalog", () => {
  it.effect("totals equal the registry; groups cover every tool exactly once, each under its own group", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      const { caller } = yield* connect("lead", "full")
      for (const who of [caller, { ...caller, profile: "portal" as const }]) {
        const body = yield* catalogOf(who)
        assert.strictEqual(body.total_tools, registry.tools.length)
        const names = namesIn(body)
        assert.strictEqual(names.length, registry.tools.length)
        assert.sameMembers(names, registry.tools.map((t) => t.name))
        for (const [group, tools] of Object.entries(body.groups)) {
          for (const entry of tools) {
            const tool = registry.tools.find((t) => t.name === entry.name)!
            assert.strictEqual(tool.group, group)
            assert.strictEqual(entry.access, tool.access)
            // schemas are the very ones tools/list advertises
            assert.deepStrictEqual(entry.input_schema, registry.inputJsonSchema(tool))
            assert.deepStrictEqual(entry.output_schema, registry.outputJsonSchema(tool))
          }
        }
        assert.sameMembers(Object.keys(body.groups), [...new Set(registry.tools.map((t) => t.group))])
      }
    }).pipe(Effect.provide(ProbedApp)))

  it.effect("each profile sees exactly what tools/list advertises it: observer's catalog hides every non-read tool", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      for (const profile of ["observer", "assistant", "full"] as const) {
        const { caller } = yield* connect(`agent-${profile}`, profile)
        const body = yield* catalogOf(caller, { brief: true })
        const expected = registry.tools.filter((t) => decideAccess(profile, t.access) !== "forbidden").map((t) => t.name)
        assert.sameMembers(namesIn(body), expected, profile)
        assert.strictEqual(body.total_tools, expected.length)
        assert.sameMembers(namesIn(body), registry.listFor(profile, "dotted").map((t) => t.name), profile)
        if (profile === "observer") {
          for (const entry of Object.values(body.groups).flat()) assert.strictEqual(entry.access, "read", entry.name)
          assert.notInclude(namesIn(body), "sophia.probe_write")
          assert.notInclude(namesIn(body), "sophia.probe_coordinate")
          assert.notProperty(body.groups, "probe_mutate")
        } else {
          assert.include(namesIn(body), "sophia.probe_write")
        }
      }
    }).pipe(Effect.provide(ProbedApp)))

  it.effect("brief drops the schemas; group narrows; an unknown group is refused with suggestions", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("lead", "full")
      const full = yield* catalogOf(caller)
      const brief = yield* catalogOf(caller, { brief: true })
      for (const entry of Object.values(brief.groups).flat()) {
        assert.notProperty(entry, "input_schema")
        assert.notProperty(entry, "output_schema")
      }
      assert.isBelow(JSON.stringify(brief).length, JSON.stringify(full).length / 2)
      // brief and group do not change what the surface is
      assert.strictEqual(brief.version_hash, full.version_hash)
      assert.strictEqual(brief.total_tools, full.total_tools)

      const system = yield* catalogOf(caller, { group: "system", brief: true })
      assert.deepStrictEqual(Object.keys(system.groups), ["system"])
      assert.includeMembers(namesIn(system), ["sophia.capability_catalog", "sophia.get_sdk_types"])
      assert.strictEqual(system.total_tools, full.total_tools)
      assert.strictEqual(system.version_hash, full.version_hash)

      const dispatcher = yield* Dispatcher
      const unknown = yield* dispatcher.call(caller, "sophia.capability_catalog", { group: "sytem" })
      assert.isFalse(unknown.ok)
      if (!unknown.ok) {
        assert.strictEqual(unknown.body.error.code, "not_found")
        assert.include(unknown.body.error.suggestions as Array<string>, "system")
      }
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("carries the build's git commit and the ledger contract hash", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("lead", "observer")
      const body = yield* catalogOf(caller, { brief: true })
      const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: path.dirname(new URL(import.meta.url).pathname) })
        .toString().trim()
      assert.strictEqual(body.server_git_sha, head.slice(0, body.server_git_sha.length))
      assert.isAtLeast(body.server_git_sha.length, 7)
      assert.strictEqual(body.ledger_contract_hash, LEDGER_CONTRACT_HASH)
      const catalog = yield* Catalog
      assert.strictEqual(catalog.serverGitSha, body.server_git_sha)
      const registry = yield* ToolRegistry
      assert.deepStrictEqual(catalog.summary(registry, caller.profile), {
        total_tools: body.total_tools,
        version_hash: body.version_hash,
        server_git_sha: body.server_git_sha
      })
    }).pipe(Effect.provide(SophiaTest)))
})

describe("server_git_sha: reading .git without a git binary", () => {
  const sha = "0123456789abcdef0123456789abcdef01234567"
  const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "sophia-git-"))

  it("is undefined outside a git checkout (the catalog then says unknown)", () => {
    const dir = tmp()
    // the premise, checked instead of branched on: git itself finds no repository here (it exits 128)
    const git = spawnSync("git", ["rev-parse", "--git-dir"], { cwd: dir, stdio: "ignore" })
    assert.strictEqual(git.status, 128, `premise: ${os.tmpdir()} is inside no git checkout`)
    assert.isUndefined(gitShaOf(dir))
  })

  it("resolves a branch through loose refs, packed refs, a detached HEAD and a worktree's gitdir file", () => {
    const repo = tmp()
    const git = path.join(repo, ".git")
    fs.mkdirSync(path.join(git, "refs", "heads"), { recursive: true })
    fs.writeFileSync(path.join(git, "HEAD"), "ref: refs/heads/main\n")
    fs.writeFileSync(path.join(git, "packed-refs"), `# pack-refs with: peeled\n${sha} refs/heads/main\n`)
    assert.strictEqual(gitShaOf(repo), sha)
    const newer = "f".repeat(40)
    fs.writeFileSync(path.join(git, "refs", "heads", "main"), newer + "\n")
    assert.strictEqual(gitShaOf(repo), newer)
    fs.writeFileSync(path.join(git, "HEAD"), sha + "\n")
    assert.strictEqual(gitShaOf(repo), sha)
    // only the folder itself is a checkout's root: a folder below it is not
    const nested = path.join(repo, "src", "services")
    fs.mkdirSync(nested, { recursive: true })
    assert.isUndefined(gitShaOf(nested))
    // a linked worktree: .git is a file pointing at its gitdir, refs live in the common dir
    const wt = tmp()
    const wtGit = path.join(git, "worktrees", "wt")
    fs.mkdirSync(wtGit, { recursive: true })
    fs.writeFileSync(path.join(wtGit, "HEAD"), "ref: refs/heads/main\n")
    fs.writeFileSync(path.join(wtGit, "commondir"), "../..\n")
    fs.writeFileSync(path.join(wt, ".git"), `gitdir: ${wtGit}\n`)
    assert.strictEqual(gitShaOf(wt), newer)
  })
})

describe("server_git_sha: only this package's own build", () => {
  const hostSha = "a".repeat(40)
  const builtSha = "b".repeat(40)
  /** A host app (a git checkout of its own) with this package installed under its node_modules. */
  const installedInHost = (withBuildInfo: boolean) => {
    const host = fs.mkdtempSync(path.join(os.tmpdir(), "sophia-host-"))
    fs.mkdirSync(path.join(host, ".git"))
    fs.writeFileSync(path.join(host, ".git", "HEAD"), hostSha + "\n")
    fs.writeFileSync(path.join(host, "package.json"), JSON.stringify({ name: "host-app" }))
    const pkg = path.join(host, "node_modules", "@sophia-mcp", "server")
    fs.mkdirSync(path.join(pkg, "dist", "mcp"), { recursive: true })
    fs.writeFileSync(path.join(pkg, "package.json"), JSON.stringify({ name: "@sophia-mcp/server" }))
    if (withBuildInfo) fs.writeFileSync(path.join(pkg, "dist", "build-info.json"), JSON.stringify({ git_sha: builtSha }))
    return path.join(pkg, "dist", "mcp")
  }

  it("an installed package reports the commit its build recorded, never its host app's", () => {
    assert.strictEqual(buildShaOf(installedInHost(true)), builtSha)
    assert.isUndefined(buildShaOf(installedInHost(false)), "no record: unknown, not the host's commit")
  })

  it("a clone reports its own checkout's commit; the build records it in dist/build-info.json", () => {
    const here = path.dirname(new URL(import.meta.url).pathname)
    const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: here }).toString().trim()
    assert.strictEqual(buildShaOf(here), head)
    const recorded = JSON.parse(fs.readFileSync(path.join(here, "..", "dist", "build-info.json"), "utf8"))
    assert.match(recorded.git_sha, /^[0-9a-f]{40}$/)
  })
})

/** A throwaway tool whose schema, name or description can be varied. */
const variant = (opts: { name?: string; extraField?: boolean; description?: string }): Tool =>
  defineTool({
    name: (opts.name ?? "sophia.variant") as `sophia.${string}`,
    group: "test",
    access: "read",
    description: opts.description ?? "a variant",
    annotations: READ_ONLY,
    input: opts.extraField
      ? Schema.Struct({ a: Schema.String, b: Schema.optional(Schema.Number) })
      : Schema.Struct({ a: Schema.String }),
    output: Schema.Struct({ ok: Schema.Boolean }),
    handler: () => Effect.succeed({ ok: true })
  })

describe("version_hash", () => {
  it.effect("changes exactly when a name, schema, access class or annotation changes", () =>
    Effect.gen(function*() {
      const live = yield* ToolRegistry
      const hashWith = (tool: Tool) => {
        const registry = makeRegistry([...live.tools, tool])
        return surfaceHash(registry, registry.tools)
      }
      const base = hashWith(variant({}))
      assert.match(base, /^[0-9a-f]{64}$/)
      assert.strictEqual(hashWith(variant({})), base, "same surface, same hash")
      assert.strictEqual(hashWith(variant({ description: "reworded" })), base, "a description is not the surface")
      assert.notStrictEqual(hashWith(variant({ extraField: true })), base, "a schema change moves it")
      assert.notStrictEqual(hashWith(variant({ name: "sophia.variant_renamed" })), base, "a rename moves it")
      assert.notStrictEqual(hashWith({ ...variant({}), access: "write" }), base, "an access change moves it")
      assert.notStrictEqual(hashWith({ ...variant({}), annotations: APPEND_ONLY }), base, "an annotation change moves it")

      // and through the tool itself, over a registry with the changed schema
      const catalog = yield* Catalog
      const { caller } = yield* connect("lead", "full")
      const r1 = makeRegistry([...live.tools, variant({})])
      const r2 = makeRegistry([...live.tools, variant({ extraField: true })])
      const h1 = yield* catalog.describe(r1, caller, { brief: true })
      const h2 = yield* catalog.describe(r2, caller, { brief: true })
      assert.notStrictEqual(h1.version_hash, h2.version_hash)
      assert.strictEqual((yield* catalog.sdkTypes(r2, caller)).version_hash, h2.version_hash)
    }).pipe(Effect.provide(SophiaTest)))

  it.effect("is stable across independently built apps in this process", () =>
    Effect.gen(function*() {
      const hashOnce = Effect.gen(function*() {
        const { caller } = yield* connect("lead", "full")
        return (yield* catalogOf(caller, { brief: true })).version_hash
      })
      const a = yield* Effect.provide(hashOnce, SophiaTest)
      const b = yield* Effect.provide(hashOnce, makeCore(SqliteLive(":memory:")))
      assert.strictEqual(a, b)
    }))

  it.effect("is stable across a restart: a fresh process computes the same hash", () =>
    Effect.gen(function*() {
      const { caller } = yield* connect("lead", "full")
      const here = (yield* catalogOf(caller, { brief: true })).version_hash
      const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
      const script = `
        import { Effect } from "effect"
        import { SophiaTest } from "./src/layers/App.ts"
        import { Catalog } from "./src/mcp/Catalog.ts"
        import { ToolRegistry } from "./src/mcp/Registry.ts"
        const hash = await Effect.runPromise(Effect.gen(function*() {
          return (yield* Catalog).versionHash(yield* ToolRegistry, "full")
        }).pipe(Effect.provide(SophiaTest)))
        process.stdout.write(hash)
      `
      const there = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"]
      }).toString().trim()
      assert.strictEqual(there, here)
    }).pipe(Effect.provide(SophiaTest)), 60_000)
})

describe("tools/list_changed", () => {
  it.effect("a run-time surface change reaches a connected MCP client as notifications/tools/list_changed", () =>
    Effect.gen(function*() {
      const dispatcher = yield* Dispatcher
      const { caller } = yield* connect("watcher", "observer")
      const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
      /**
       * A client on its own server. `sent` counts the list_changed notifications its server hands to the
       * transport, `received` those the client handles; `next()` resolves at the next one received.
       */
      const open = Effect.promise(async () => {
        const server = makeMcpServer({ dispatcher, naming: "underscore", runPromise, resolveCaller: async () => caller })
        const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
        const counts = { sent: 0, received: 0 }
        const send = serverSide.send.bind(serverSide)
        serverSide.send = (message, options) => {
          if ("method" in message && message.method === "notifications/tools/list_changed") counts.sent++
          return send(message, options)
        }
        const client = new Client({ name: "test", version: "0.0.0" })
        let waiting: Array<() => void> = []
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
          counts.received++
          const resolve = waiting
          waiting = []
          resolve.forEach((r) => r())
        })
        await Promise.all([server.connect(serverSide), client.connect(clientSide)])
        const next = () => new Promise<void>((resolve) => waiting.push(resolve))
        return { client, counts, next }
      })
      const { client, counts, next } = yield* open
      assert.isTrue(client.getServerCapabilities()?.tools?.listChanged)

      // the SDK client accepts our tools/list (every inputSchema an object) and validates results against outputSchema
      const listed = yield* Effect.promise(() => client.listTools())
      assert.sameMembers(listed.tools.map((t) => t.name), dispatcher.registry.listFor("observer", "underscore").map((t) => t.name))
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "sophia_capability_catalog", arguments: { brief: true } })
      )
      assert.notOk(result.isError)
      assert.strictEqual((result.structuredContent as CatalogBody).total_tools, listed.tools.length)
      const types = yield* Effect.promise(() => client.callTool({ name: "sophia_get_sdk_types", arguments: {} }))
      assert.notOk(types.isError)

      // waited for, not counted at once: one change, exactly one notification
      const first = next()
      dispatcher.registry.changes.notify()
      yield* Effect.promise(() => first)
      assert.deepStrictEqual(counts, { sent: 1, received: 1 })

      // after the client goes away, a change is not sent to it (and does not throw). A second client that
      // stays connected is the barrier: once it has its notification, the gone one would have had its own.
      const other = yield* open
      yield* Effect.promise(() => client.close())
      const otherNotified = other.next()
      dispatcher.registry.changes.notify()
      yield* Effect.promise(() => otherNotified)
      assert.deepStrictEqual(other.counts, { sent: 1, received: 1 })
      assert.deepStrictEqual(counts, { sent: 1, received: 1 })
      yield* Effect.promise(() => other.client.close())
    }).pipe(Effect.provide(SophiaTest)))
})

describe("advertised JSON Schemas (tools/list economy)", () => {
  it.effect("every inputSchema is an object at the root, with no noise keys; data keywords and odd property names survive", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry
      for (const tool of registry.tools) {
        const input = registry.inputJsonSchema(tool)
        assert.strictEqual(input.type, "object", tool.name)
        // a tool refuses keys it does not define, and says so once, at the top of its input schema
        assert.strictEqual(input.additionalProperties, false, tool.name)
        const { additionalProperties: _, ...inputBelowTop } = input
        for (const schema of [inputBelowTop, registry.outputJsonSchema(tool)]) {
          const text = JSON.stringify(schema)
          assert.notInclude(text, `"additionalProperties":false`, tool.name)
          assert.notMatch(text, /"title":"(maxLength|minLength|int|nonNegative|positive|pattern)/, tool.name)
        }
        assert.property(registry.outputJsonSchema(tool).properties as object, "_inbox_unread", tool.name)
      }
      const slim = slimJsonSchema(toJsonSchema(Schema.Struct({
        title: Schema.String.pipe(Schema.maxLength(10)),
        mode: Schema.Literal("a", "b"),
        maybe: Schema.NullOr(Schema.Number),
        note: Schema.String.annotations({ description: "kept: written by a person" })
      }))) as any
      assert.deepStrictEqual(Object.keys(slim.properties), ["title", "mode", "maybe", "note"])
      assert.strictEqual(slim.properties.title.maxLength, 10)
      assert.isUndefined(slim.properties.title.description)
      assert.deepStrictEqual(slim.properties.mode.enum, ["a", "b"])
      assert.deepStrictEqual(slim.properties.maybe.type, ["number", "null"])
      assert.strictEqual(slim.properties.note.description, "kept: written by a person")
      assert.deepStrictEqual(slim.required, ["title", "mode", "maybe", "note"])
      assert.deepStrictEqual(slimJsonSchema({ enum: [{ title: "x" }] }), { enum: [{ title: "x" }] })
    }).pipe(Effect.provide(SophiaTest)))
})
