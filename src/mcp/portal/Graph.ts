import { escape } from "./Html.js"

/** One wait, as the wait graph reports it (waiter waits on `on`). */
export interface GraphEdge {
  readonly wait_id: string
  readonly waiter: { readonly connection_id: string; readonly agent_name: string }
  readonly on: { readonly connection_id: string; readonly agent_name: string }
  readonly reason: string
}

export interface GraphInput {
  readonly edges: ReadonlyArray<GraphEdge>
  /** each cycle as its connection ids */
  readonly cycles: ReadonlyArray<ReadonlyArray<string>>
  /** wait id → why the awaited connection is an orphan ("revoked" | "silent") */
  readonly orphanedWaits: ReadonlyMap<string, string>
}

export interface LaidOut {
  readonly nodes: ReadonlyArray<{ id: string; name: string; layer: number; row: number; x: number; y: number; orphan: boolean; inCycle: boolean }>
  readonly width: number
  readonly height: number
}

const NODE_W = 168
const NODE_H = 34
const COL_GAP = 96
const ROW_GAP = 18
const PAD = 16

/**
 * A layered layout: an agent nobody-waits-on-it sits in the rightmost column; every waiter sits one column
 * left of the deepest agent it waits on (edges that close a cycle are left out of the layering, and drawn
 * marked). Rows within a column are ordered by the mean row of what they wait on (one barycentre pass), then
 * by name, so 30 agents stay readable.
 */
export const layout = (input: GraphInput): LaidOut => {
  const names = new Map<string, string>()
  const out = new Map<string, Array<string>>()
  for (const e of input.edges) {
    names.set(e.waiter.connection_id, e.waiter.agent_name)
    names.set(e.on.connection_id, e.on.agent_name)
    const list = out.get(e.waiter.connection_id) ?? []
    if (!list.includes(e.on.connection_id)) list.push(e.on.connection_id)
    out.set(e.waiter.connection_id, list)
  }
  const depth = new Map<string, number>()
  const visiting = new Set<string>()
  const visit = (id: string): number => {
    const known = depth.get(id)
    if (known !== undefined) return known
    if (visiting.has(id)) return -1 // a back edge: ignored for layering
    visiting.add(id)
    let d = 0
    for (const next of out.get(id) ?? []) {
      const nd = visit(next)
      if (nd >= 0) d = Math.max(d, nd + 1)
    }
    visiting.delete(id)
    depth.set(id, d)
    return d
  }
  const ids = [...names.keys()].sort((a, b) => (names.get(a)! < names.get(b)! ? -1 : names.get(a)! > names.get(b)! ? 1 : a < b ? -1 : 1))
  for (const id of ids) visit(id)
  const maxDepth = Math.max(0, ...depth.values())
  const columns: Array<Array<string>> = Array.from({ length: maxDepth + 1 }, () => [])
  // column 0 = deepest waiters (left); the last column = awaited, waiting on nobody (right)
  for (const id of ids) columns[maxDepth - depth.get(id)!].push(id)
  const rowOf = new Map<string, number>()
  for (let c = columns.length - 1; c >= 0; c--) {
    const col = columns[c]
    const score = (id: string) => {
      const rows = (out.get(id) ?? []).map((t) => rowOf.get(t)).filter((r): r is number => r !== undefined)
      return rows.length === 0 ? Number.MAX_SAFE_INTEGER : rows.reduce((a, b) => a + b, 0) / rows.length
    }
    col.sort((a, b) => score(a) - score(b))
    col.forEach((id, i) => rowOf.set(id, i))
  }
  const orphanTargets = new Set(input.edges.filter((e) => input.orphanedWaits.has(e.wait_id)).map((e) => e.on.connection_id))
  const inCycle = new Set(input.cycles.flat())
  const nodes = columns.flatMap((col, c) =>
    col.map((id, r) => ({
      id,
      name: names.get(id)!,
      layer: c,
      row: r,
      x: PAD + c * (NODE_W + COL_GAP),
      y: PAD + r * (NODE_H + ROW_GAP),
      orphan: orphanTargets.has(id),
      inCycle: inCycle.has(id)
    }))
  )
  const rows = Math.max(1, ...columns.map((c) => c.length))
  return {
    nodes,
    width: PAD * 2 + columns.length * NODE_W + (columns.length - 1) * COL_GAP,
    height: PAD * 2 + rows * NODE_H + (rows - 1) * ROW_GAP
  }
}

const truncate = (s: string, n: number) => (s.length > n ? s.slice(0, n - 1) + "…" : s)

/** The wait graph as an SVG: agents as named boxes, waits as arrows (cycles red, orphaned waits dashed). */
export const waitGraphSvg = (input: GraphInput): string => {
  if (input.edges.length === 0) return ""
  const laid = layout(input)
  const at = new Map(laid.nodes.map((n) => [n.id, n]))
  const cycleEdges = new Set<string>()
  for (const cycle of input.cycles) {
    for (let i = 0; i < cycle.length; i++) cycleEdges.add(`${cycle[i]}>${cycle[(i + 1) % cycle.length]}`)
  }
  const edges = input.edges.map((e) => {
    const a = at.get(e.waiter.connection_id)!
    const b = at.get(e.on.connection_id)!
    const cls = ["edge"]
    if (cycleEdges.has(`${a.id}>${b.id}`)) cls.push("edge-cycle")
    const orphan = input.orphanedWaits.get(e.wait_id)
    if (orphan !== undefined) cls.push("edge-orphan")
    let d: string
    if (b.layer > a.layer) {
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x - 4, y2 = b.y + NODE_H / 2
      const mx = (x1 + x2) / 2
      d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`
    } else {
      // same column or backwards (a cycle): loop below/around
      const x1 = a.x + NODE_W / 2, y1 = a.y + NODE_H, x2 = b.x + NODE_W / 2, y2 = b.y + NODE_H + 4
      const dip = Math.max(y1, y2) + 28
      d = `M${x1},${y1} C${x1},${dip} ${x2},${dip} ${x2},${y2}`
    }
    const title = `${e.waiter.agent_name} waits on ${e.on.agent_name}: ${e.reason}${orphan ? ` (orphaned: ${orphan})` : ""}`
    return `<path class="${cls.join(" ")}" d="${d}" marker-end="url(#arrow)"><title>${escape(title)}</title></path>`
  })
  const nodes = laid.nodes.map((n) => {
    const cls = ["node"]
    if (n.orphan) cls.push("node-orphan")
    if (n.inCycle) cls.push("node-cycle")
    return `<g class="${cls.join(" ")}"><rect x="${n.x}" y="${n.y}" width="${NODE_W}" height="${NODE_H}" rx="6"/>` +
      `<text x="${n.x + NODE_W / 2}" y="${n.y + NODE_H / 2 + 5}" text-anchor="middle">${escape(truncate(n.name, 22))}</text>` +
      `<title>${escape(n.name)}${n.orphan ? " (orphan: revoked or silent)" : ""}</title></g>`
  })
  const height = laid.height + 40
  return `<svg class="wait-graph" role="img" aria-label="wait graph: ${laid.nodes.length} agents, ${input.edges.length} waits" ` +
    `viewBox="0 0 ${laid.width} ${height}" width="${laid.width}" height="${height}" xmlns="http://www.w3.org/2000/svg">` +
    `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">` +
    `<path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>` +
    edges.join("") + nodes.join("") + `</svg>`
}
