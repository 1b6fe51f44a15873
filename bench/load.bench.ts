/**
 * The fleet under load over real HTTP (issue "Speed"). Two servers run side by side as child processes:
 * Sophia's daemon (`bench/support/sophia-server.ts`) and a bare server on the same MCP SDK and Streamable
 * HTTP transport whose only tool does nothing (`bench/support/bare-server.ts`, the transport's limit).
 * Clients are real SDK clients in this process, one session each. Phases alternate bare / Sophia so
 * machine noise hits both.
 *
 *  1. one agent, sequential: `coordination_post` round trip vs the bare no-op round trip (target ≤ 1.5×);
 *  2. 50 agents, closed loop, mixed (50% inbox, 25% post, 15% ledger append with CAS, 10% orient):
 *     calls/s vs bare calls/s (target ≥ 0.7×) and p99 vs bare p99 (target ≤ 1.5×).
 *
 * `LOAD_SECONDS` (default 10) sets each phase's length.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import * as readline from "node:readline"

const AGENTS = 50
const SECONDS = Number(process.env.LOAD_SECONDS ?? 10)
const SEQUENTIAL = 300
const here = path.dirname(new URL(import.meta.url).pathname)

const start = (script: string) =>
  new Promise<{ child: ChildProcess; info: any }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--no-node-snapshot", "--import", "tsx", path.join(here, "support", script)], {
      stdio: ["ignore", "pipe", "inherit"],
      env: { ...process.env, AGENTS: String(AGENTS), SOPHIA_SWEEP_INTERVAL_MS: "5000" }
    })
    const lines = readline.createInterface({ input: child.stdout! })
    lines.once("line", (line) => resolve({ child, info: JSON.parse(line) }))
    child.once("exit", (code) => reject(new Error(`${script} exited with ${code}`)))
  })

const connect = async (url: string, bearer?: string) => {
  const client = new Client({ name: "load", version: "1.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: bearer ? { Authorization: `Bearer ${bearer}` } : {} }
  })
  await client.connect(transport)
  return client
}

const percentile = (xs: Array<number>, p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

type Op = (client: Client, agent: number) => Promise<void>

const call = async (client: Client, name: string, args: Record<string, unknown>) => {
  const result = await client.callTool({ name, arguments: args })
  if (result.isError) throw new Error(`${name}: ${JSON.stringify(result.content)}`)
  return JSON.parse((result.content as Array<{ text: string }>)[0].text)
}

/** Sophia's mixed workload; each agent keeps its own work item's head for the CAS appends. */
const sophiaMix = () => {
  const heads = new Map<number, string | null>()
  let seed = 42
  const rand = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff
  const op: Op = async (client, agent) => {
    const r = rand()
    if (r < 0.5) {
      await call(client, "sophia_coordination_inbox", { limit: 20 })
    } else if (r < 0.75) {
      await call(client, "sophia_coordination_post", { channel: `arc:load-${agent % 10}`, kind: "status", body: "progress" })
    } else if (r < 0.9) {
      const head = heads.get(agent) ?? null
      const events = head === null
        ? [{ type: "opened", title: `item of agent ${agent}` }]
        : [{ type: "asserted", field: "progress", value: Math.floor(rand() * 100) }]
      const out = await call(client, "sophia_ledger_append", { work_id: `load-${agent}`, expected_head: head, events })
      heads.set(agent, out.head)
    } else {
      await call(client, "sophia_orient", {})
    }
  }
  return op
}
const bareOp: Op = async (client) => {
  await client.callTool({ name: "noop", arguments: {} })
}

const closedLoop = async (clients: Array<Client>, op: Op, seconds: number) => {
  const latencies: Array<number> = []
  const deadline = performance.now() + seconds * 1000
  const t0 = performance.now()
  await Promise.all(clients.map(async (client, agent) => {
    while (performance.now() < deadline) {
      const s = performance.now()
      await op(client, agent)
      latencies.push(performance.now() - s)
    }
  }))
  const elapsed = (performance.now() - t0) / 1000
  return { rate: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99) }
}

const sequential = async (client: Client, op: () => Promise<void>) => {
  for (let i = 0; i < 30; i++) await op() // warm-up
  const xs: Array<number> = []
  for (let i = 0; i < SEQUENTIAL; i++) {
    const s = performance.now()
    await op()
    xs.push(performance.now() - s)
  }
  return percentile(xs, 50)
}

const main = async () => {
  const [sophia, bare] = await Promise.all([start("sophia-server.ts"), start("bare-server.ts")])
  try {
    const sophiaClients = await Promise.all((sophia.info.bearers as Array<string>).map((b) => connect(sophia.info.url, b)))
    const bareClients = await Promise.all(Array.from({ length: AGENTS }, () => connect(bare.info.url)))

    // 1. one agent, sequential round trips (bare first, then Sophia, then bare again: the mean of the two)
    const bare1 = await sequential(bareClients[0], () => bareOp(bareClients[0], 0))
    const post = await sequential(sophiaClients[0], async () => {
      await call(sophiaClients[0], "sophia_coordination_post", { channel: "seq", kind: "status", body: "hello" })
    })
    const bare2 = await sequential(bareClients[0], () => bareOp(bareClients[0], 0))
    const bareSeq = (bare1 + bare2) / 2

    // 2. 50 agents, closed loop, alternating phases
    const mix = sophiaMix()
    await closedLoop(sophiaClients, mix, 2) // warm-up (creates the work items)
    await closedLoop(bareClients, bareOp, 2)
    const b1 = await closedLoop(bareClients, bareOp, SECONDS / 2)
    const s1 = await closedLoop(sophiaClients, mix, SECONDS / 2)
    const b2 = await closedLoop(bareClients, bareOp, SECONDS / 2)
    const s2 = await closedLoop(sophiaClients, mix, SECONDS / 2)
    const bareRate = (b1.rate + b2.rate) / 2
    const sophiaRate = (s1.rate + s2.rate) / 2
    const bareP99 = (b1.p99 + b2.p99) / 2
    const sophiaP99 = (s1.p99 + s2.p99) / 2

    const rows = [
      ["measure", "Sophia", "bare SDK server", "ratio", "target"],
      ["---", "---", "---", "---", "---"],
      [
        "one agent, sequential: coordination_post vs no-op round trip (p50)",
        `${post.toFixed(2)} ms`,
        `${bareSeq.toFixed(2)} ms`,
        `${(post / bareSeq).toFixed(2)}×`,
        "≤ 1.5×"
      ],
      [
        `${AGENTS} agents, closed loop, mixed: calls/s`,
        sophiaRate.toFixed(0),
        bareRate.toFixed(0),
        `${(sophiaRate / bareRate).toFixed(2)}×`,
        "≥ 0.7×"
      ],
      [
        `${AGENTS} agents, closed loop, mixed: p99 latency`,
        `${sophiaP99.toFixed(1)} ms`,
        `${bareP99.toFixed(1)} ms`,
        `${(sophiaP99 / bareP99).toFixed(2)}×`,
        "≤ 1.5×"
      ]
    ]
    console.log(`\n## HTTP load (${AGENTS} agents, ${SECONDS} s per side)\n`)
    for (const r of rows) console.log(`| ${r.join(" | ")} |`)
    await Promise.all([...sophiaClients, ...bareClients].map((c) => c.close().catch(() => undefined)))
  } finally {
    sophia.child.kill("SIGKILL")
    bare.child.kill("SIGKILL")
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
