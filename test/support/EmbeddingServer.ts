import * as http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A small OpenAI-compatible embeddings provider the suite starts itself: `POST /v1/embeddings` with
 * `{ model, input }` answers `{ data: [{ index, embedding }] }` with deterministic vectors. A text's vector
 * is the sum of its words' vectors, each word's a pseudo-random unit vector seeded by its *concept*: the
 * words of one synonym group share a concept, so "automobile repair" lands next to "car maintenance"
 * though they share no word. The real client (services/embeddings/Provider.ts) talks to it over HTTP.
 *
 * Modes: `ok`; `fail` (HTTP 500); `hang` (reads the request, never answers until closed). `delayMs` makes
 * each answer wait (a provider's own time); `requests`/`texts` count what it was asked, `pending` what it
 * has not answered yet.
 */
export const SYNONYMS: ReadonlyArray<ReadonlyArray<string>> = [
  ["car", "automobile", "vehicle", "auto"],
  ["repair", "maintenance", "fix", "service"],
  ["quick", "fast", "rapid", "speedy"],
  ["doctor", "physician", "clinician"],
  ["invoice", "bill", "receipt"]
]

export const DIM = 64

const concepts = new Map<string, string>()
for (const group of SYNONYMS) for (const word of group) concepts.set(word, group[0])

/** A deterministic unit vector per concept (xorshift seeded by the concept's characters). */
const conceptVector = (concept: string, dim: number): Float64Array => {
  let seed = 2166136261
  for (let i = 0; i < concept.length; i++) seed = Math.imul(seed ^ concept.charCodeAt(i), 16777619) >>> 0
  const v = new Float64Array(dim)
  let norm = 0
  for (let i = 0; i < dim; i++) {
    seed ^= seed << 13
    seed >>>= 0
    seed ^= seed >>> 17
    seed ^= seed << 5
    seed >>>= 0
    v[i] = seed / 2 ** 32 - 0.5
    norm += v[i] * v[i]
  }
  norm = Math.sqrt(norm)
  for (let i = 0; i < dim; i++) v[i] /= norm
  return v
}

/** The vector of a text (not normalized: the client normalizes). */
export const embedText = (text: string, dim = DIM): Array<number> => {
  const sum = new Float64Array(dim)
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    const v = conceptVector(concepts.get(word) ?? word, dim)
    for (let i = 0; i < dim; i++) sum[i] += v[i]
  }
  return Array.from(sum)
}

export type Mode = "ok" | "fail" | "hang"

export interface EmbeddingServer {
  readonly url: string
  mode: Mode
  delayMs: number
  readonly stats: { requests: number; texts: number; pending: number }
  readonly close: () => Promise<void>
}

export const startEmbeddingServer = async (options: { mode?: Mode; delayMs?: number; dim?: number } = {}): Promise<EmbeddingServer> => {
  const dim = options.dim ?? DIM
  const hanging = new Set<http.ServerResponse>()
  const stats = { requests: 0, texts: 0, pending: 0 }
  const state: { mode: Mode; delayMs: number } = { mode: options.mode ?? "ok", delayMs: options.delayMs ?? 0 }
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      stats.requests++
      if (req.method !== "POST" || req.url !== "/v1/embeddings") {
        res.writeHead(404).end()
        return
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { model: string; input: string | Array<string> }
      const input = typeof body.input === "string" ? [body.input] : body.input
      stats.texts += input.length
      if (state.mode === "fail") {
        res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "provider down" } }))
        return
      }
      stats.pending++
      if (state.mode === "hang") {
        hanging.add(res)
        return
      }
      const answer = () => {
        stats.pending--
        const data = input.map((text, index) => ({ object: "embedding", index, embedding: embedText(text, dim) }))
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data, model: body.model }))
      }
      if (state.delayMs > 0) setTimeout(answer, state.delayMs)
      else answer()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    get mode() {
      return state.mode
    },
    set mode(m: Mode) {
      state.mode = m
    },
    get delayMs() {
      return state.delayMs
    },
    set delayMs(ms: number) {
      state.delayMs = ms
    },
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy()
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
