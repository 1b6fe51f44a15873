/**
 * The benchmarks' text corpus: made-up words over a vocabulary of 8,000, drawn by Zipf(1) like a natural
 * language, from a fixed seed — every run writes the same documents, posts and facts, and asks the same
 * queries (bench/inbox.bench.ts's search part, bench/search.bench.ts, bench/search-pg.bench.ts).
 */

export const makeCorpus = (seed = 42) => {
  let state = seed
  const random = () => (state = (state * 1664525 + 1013904223) >>> 0) / 2 ** 32
  const SYL = ["ka", "lo", "mi", "ren", "tu", "sa", "vor", "el", "qui", "dan", "pe", "zo", "ra", "nik", "bu", "ost"]
  const word = (i: number) => {
    let w = ""
    for (let n = i + 17; n > 0; n = Math.floor(n / SYL.length)) w += SYL[n % SYL.length]
    return w
  }
  const VOCAB = 8000
  const words = Array.from({ length: VOCAB }, (_, i) => word(i))
  const cumulative: Array<number> = []
  let total = 0
  for (let i = 0; i < VOCAB; i++) cumulative.push(total += 1 / (i + 1))
  for (let i = 0; i < VOCAB; i++) cumulative[i] /= total
  const zipf = () => {
    const r = random()
    let lo = 0
    let hi = VOCAB - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cumulative[mid] < r) lo = mid + 1
      else hi = mid
    }
    return words[lo]
  }
  /** `n` words */
  const text = (n: number) => Array.from({ length: n }, zipf).join(" ")
  /** `count` queries of 1–3 words of middling frequency (ranks 20–2,000) */
  const queries = (count: number) =>
    Array.from({ length: count }, () => Array.from({ length: 1 + Math.floor(random() * 3) }, () => words[20 + Math.floor(random() * 1980)]).join(" "))
  return { random, words, zipf, text, queries }
}

/** The `p`-th percentile of `xs` (nearest rank). */
export const pct = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}
