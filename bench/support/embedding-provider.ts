/**
 * The benches' embeddings provider in a process of its own (as a real one is): the suite's deterministic
 * OpenAI-compatible server (test/support/EmbeddingServer.ts). Args: dimensions, per-request delay in ms.
 * Prints its URL on stdout, then serves until killed.
 */
import { startEmbeddingServer } from "../../test/support/EmbeddingServer.js"

const dim = Number(process.argv[2] ?? 384)
const delayMs = Number(process.argv[3] ?? 0)
const server = await startEmbeddingServer({ dim, delayMs })
process.stdout.write(`${server.url}\n`)
