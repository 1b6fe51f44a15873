/**
 * The wait graph's two questions about cycles, on edges "waiter is waiting on": which cycles it holds
 * (`wait_graph`), and whether one more edge would close one (`declare_wait` refuses it). Pure: the edges
 * are read by the caller.
 */

type Edge = readonly [from: string, to: string]

const successors = (edges: ReadonlyArray<Edge>) => {
  const out = new Map<string, Array<string>>()
  for (const [from, to] of edges) {
    const list = out.get(from)
    if (list) list.push(to)
    else out.set(from, [to])
  }
  return out
}

/** Elementary cycles of a small directed graph, each once (rotated to start at its smallest node). */
export const findCycles = (edges: ReadonlyArray<Edge>): Array<Array<string>> => {
  const out = successors(edges)
  const seen = new Set<string>()
  const cycles: Array<Array<string>> = []
  const state = new Map<string, "active" | "done">()
  const stack: Array<string> = []
  const visit = (node: string) => {
    state.set(node, "active")
    stack.push(node)
    for (const next of out.get(node) ?? []) {
      if (state.get(next) === "active") {
        const cycle = stack.slice(stack.indexOf(next))
        const start = cycle.indexOf([...cycle].sort()[0])
        const rotated = [...cycle.slice(start), ...cycle.slice(0, start)]
        const key = rotated.join(">")
        if (!seen.has(key)) {
          seen.add(key)
          cycles.push(rotated)
        }
      } else if (!state.has(next)) {
        visit(next)
      }
    }
    stack.pop()
    state.set(node, "done")
  }
  for (const node of out.keys()) if (!state.has(node)) visit(node)
  return cycles
}

/**
 * Would `waiter` waiting on `on` close a cycle over `edges`? Returns the cycle (waiter first, then `on`, then
 * the path back) or undefined.
 */
export const cycleThrough = (edges: ReadonlyArray<Edge>, waiter: string, on: string): Array<string> | undefined => {
  if (waiter === on) return [waiter]
  const next = successors(edges)
  // breadth-first from `on` along "is waiting on" edges, looking for `waiter`
  const parent = new Map<string, string>([[on, on]])
  const queue = [on]
  while (queue.length > 0) {
    const node = queue.shift()!
    for (const n of next.get(node) ?? []) {
      if (parent.has(n)) continue
      parent.set(n, node)
      if (n === waiter) {
        const path: Array<string> = []
        for (let at = node; at !== on; at = parent.get(at)!) path.unshift(at)
        return [waiter, on, ...path]
      }
      queue.push(n)
    }
  }
  return undefined
}
