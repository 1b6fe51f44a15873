import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SophiaTest } from "../src/layers/App.js"
import { Embeddings } from "../src/services/Embeddings.js"
import { normalize } from "../src/services/embeddings/Provider.js"

/**
 * The nearest-neighbour scan (services/embeddings/Nearest.ts) over vectors stored in the real store: the
 * SIMD scan (dimensions a multiple of 16), the JavaScript loop (any other), and the int8 quantized scan
 * each return the brute-force answer's best items, and never an item outside the scope asked.
 */

let seed = 7
const random = () => (seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32 - 0.5
const vector = (dim: number) => normalize(Array.from({ length: dim }, random))

const brute = (rows: ReadonlyArray<{ id: string; entity: string; v: Float32Array }>, q: Float32Array, limit: number, entity?: string) =>
  rows
    .filter((r) => entity === undefined || r.entity === entity)
    .map((r) => ({ id: r.id, s: r.v.reduce((acc, x, i) => acc + x * q[i], 0) }))
    .sort((a, b) => b.s - a.s)
    .slice(0, limit)
    .map((r) => r.id)

const stored = (dim: number, kind: "documents" | "facts", n: number) =>
  Effect.gen(function*() {
    const embeddings = yield* Embeddings
    const rows = Array.from({ length: n }, (_, i) => ({ id: `${kind}-${dim}-${i}`, entity: i % 2 === 0 ? "e1" : "e2", v: vector(dim) }))
    for (let i = 0; i < rows.length; i += 100) {
      const page = rows.slice(i, i + 100)
      yield* embeddings.store(
        page.map((r) => ({ kind, itemId: r.id, userId: "u1", entityId: r.entity, vector: r.v })),
        kind,
        "",
        { pos: 0, at: "", itemId: "" }
      )
    }
    return rows
  })

describe("nearest neighbours", () => {
  it.effect("exact scans (SIMD at 64 dimensions, JavaScript at 24) and the int8 quantized scan re-ranked return the brute-force best, within scope", () =>
    Effect.gen(function*() {
      const embeddings = yield* Embeddings
      for (const [dim, kind] of [[64, "documents"], [24, "facts"]] as const) {
        const rows = yield* stored(dim, kind, 600)
        for (let k = 0; k < 5; k++) {
          const q = vector(dim)
          for (const method of ["exact", "quantized", "auto"] as const) {
            const all = yield* embeddings.nearest("u1", kind, q, 10, undefined, method)
                        assert.deepStrictEqual(all.map((n) => n.id), brute(rows, q, 10), `${dim} ${method}`)
            const scoped = yield* embeddings.nearest("u1", kind, q, 10, ["e1"], method)
            assert.deepStrictEqual(scoped.map((n) => n.id), brute(rows, q, 10, "e1"), `${dim} ${method} in scope`)
            assert.deepStrictEqual(yield* embeddings.nearest("u1", kind, q, 10, [], method), [])
            // another user's vectors are not scanned
            assert.deepStrictEqual(yield* embeddings.nearest("u2", kind, q, 10, undefined, method), [])
          }
        }
        // rows written after a scan are found by the next one
        const extra = vector(dim)
        yield* embeddings.store([{ kind, itemId: `late-${dim}`, userId: "u1", entityId: "e1", vector: extra }], kind, "", {
          pos: 0,
          at: "",
          itemId: ""
        })
        assert.strictEqual((yield* embeddings.nearest("u1", kind, extra, 1, ["e1"]))[0].id, `late-${dim}`)
      }
    }).pipe(Effect.provide(SophiaTest)))
})
