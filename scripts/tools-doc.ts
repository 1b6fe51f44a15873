/** Writes docs/tools.md from the tool registry: `npm run docs:tools`. */
import { Effect } from "effect"
import * as fs from "node:fs"
import { SophiaTest } from "../src/layers/App.js"
import { ToolRegistry } from "../src/mcp/Registry.js"
const prog = Effect.gen(function* () {
  const reg = yield* ToolRegistry
  const lines = ["# Tool reference", "", "Generated from the tool registry (`npm run docs:tools`). Every tool is advertised as `sophia_<name>` by default and accepted as `sophia.<name>` too; `POST /api/tools/<name>` calls it over REST. `sophia.capability_catalog` returns the same list with the full input and output JSON Schemas at run time.", "", "| tool | group | access | description |", "|---|---|---|---|"]
  for (const t of reg.tools) {
    lines.push(`| \`${t.name}\` | ${t.group} | ${t.access} | ${t.description.replace(/\|/g, "\\|").replace(/\n+/g, " ")} |`)
  }
  lines.push("", "## `sophia.search` results", "", "`{ items, total, fusion, degraded? }`. Each item: `kind` (`document` | `fact` | `post`), `id`, `title`, `snippet` (the matched words in `[` `]`; a hit only dense retrieval found shows the start of its text), `score` (its RRF score: Σ 1/(60 + rank) over the lists that found it), `grounding` (false for posts), `rank` (its best rank within its kind), `signals` (`bm25`, `dense`: which found it), `entity_id` (documents, facts), `channel` / `channel_seq` (posts), `created_at`. `total`: distinct hits found across the kinds searched (each list contributes at most `limit`). `fusion`: `{ method: \"rrf\", k: 60, signals }` — `[\"bm25\", \"dense\"]` with an embeddings provider (`SOPHIA_EMBEDDINGS_URL`), else `[\"bm25\"]`. `degraded`: present when the provider is configured but failed or did not answer in time for this search — why; BM25 alone answered.")
  lines.push("", "Access classes: `read` (every profile), `coordinate` (assistant and full), `write` (full; an assistant needs a per-call approval), `elevated` (always the owner's explicit approval). See [refusal-codes.md](refusal-codes.md) for what a refused call returns.", "")
  // written directly (a redirected stdout can be cut short by the exit below)
  fs.writeFileSync(new URL("../docs/tools.md", import.meta.url), lines.join("\n"))
})
Effect.runPromise(prog.pipe(Effect.provide(SophiaTest), Effect.scoped) as any).then(() => process.exit(0))
