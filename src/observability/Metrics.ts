/**
 * The daemon's metrics: Effect's metric registry (counters and histograms updated where things happen)
 * rendered as Prometheus text for `GET /metrics`, plus gauges read at scrape time from the services that
 * own them (pending approvals, sandbox children, the embedding backlog) and from the transport (MCP sessions).
 */
import { Context, Effect, Layer, Metric, MetricBoundaries, MetricKey, MetricLabel, MetricState } from "effect"
import type { MetricHook, MetricPair } from "effect"
import { Approvals } from "../services/Approvals.js"
import { Embeddings } from "../services/Embeddings.js"
import { Sandbox } from "../services/Sandbox.js"

/** Every tool call, by canonical tool name and outcome (`ok`, a refusal code, or `internal_error`). */
const toolCallsKey = MetricKey.counter("sophia_tool_calls_total", {
  description: "tool calls by tool and outcome",
  incremental: true
})
/** Tool call latency in seconds, by tool. */
const toolCallSecondsKey = MetricKey.histogram(
  "sophia_tool_call_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]),
  "tool call latency by tool"
)

/**
 * HTTP request latency in seconds, by route (`mcp`: a POST to the MCP endpoint; `rest`: `/api/tools/<name>`):
 * from the moment the daemon reads the request to the moment its response has left, so around a tool
 * call's own duration it adds the transport's work (authentication, the MCP session's handling, writing
 * the reply). Beside what clients measure, it tells where a slow call waited: inside the daemon, or
 * before the daemon could read it (a saturated event loop) and in the client.
 */
const httpRequestSecondsKey = MetricKey.histogram(
  "sophia_http_request_duration_seconds",
  MetricBoundaries.fromIterable([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]),
  "HTTP request latency inside the daemon (read to response sent) by route"
)

/**
 * Whether the Dispatcher writes its one `info` line per tool call. Off by default (an embedder's or a
 * test's default logger writes to stdout); the daemon and `sophia stdio` turn it on (`RequestLogOn`).
 */
export class RequestLog extends Context.Reference<RequestLog>()("sophia/RequestLog", { defaultValue: () => false }) {}
export const RequestLogOn = Layer.succeed(RequestLog, true)

// The registry's entry (hook) of each (tool, outcome), looked up once. A tagged `Metric` does not make the
// per-call path cheap: every update of one builds its tags afresh (a new array, so its hook cache misses),
// then a new metric key, hashed, and a registry lookup. The hooks are the registry's own state, so
// `Metric.snapshot` (and /metrics) reads exactly what is recorded here. Bounded: tools and refusal codes are
// fixed sets (an unknown tool name is recorded as "unknown").
const callCounters = new Map<string, MetricHook.MetricHook.Counter<number>>()
const callHistograms = new Map<string, MetricHook.MetricHook.Histogram>()

const counterOf = (tool: string, outcome: string) => {
  const key = `${tool}\u0000${outcome}`
  let counter = callCounters.get(key)
  if (counter === undefined) {
    callCounters.set(
      key,
      counter = Metric.globalMetricRegistry.get(
        MetricKey.taggedWithLabels(toolCallsKey, [MetricLabel.make("tool", tool), MetricLabel.make("outcome", outcome)])
      )
    )
  }
  return counter
}
const histogramOf = (tool: string) => {
  let histogram = callHistograms.get(tool)
  if (histogram === undefined) {
    callHistograms.set(tool, histogram = Metric.globalMetricRegistry.get(MetricKey.tagged(toolCallSecondsKey, "tool", tool)))
  }
  return histogram
}

/** Record one finished call (a plain function: two in-memory updates, nothing to run). */
export const recordToolCall = (tool: string, outcome: string, seconds: number): void => {
  counterOf(tool, outcome).update(1)
  histogramOf(tool).update(seconds)
}

const httpHistograms = new Map<string, MetricHook.MetricHook.Histogram>()
/** Record one finished HTTP request of a route (a fixed set: `mcp`, `rest`). */
export const recordHttpRequest = (route: "mcp" | "rest", seconds: number): void => {
  let histogram = httpHistograms.get(route)
  if (histogram === undefined) {
    httpHistograms.set(route, histogram = Metric.globalMetricRegistry.get(MetricKey.tagged(httpRequestSecondsKey, "route", route)))
  }
  histogram.update(seconds)
}

const escapeLabel = (v: string) => v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")
const labels = (tags: ReadonlyArray<readonly [string, string]>) =>
  tags.length === 0 ? "" : `{${tags.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`
const num = (n: number | bigint) => (typeof n === "bigint" ? n.toString() : Number.isFinite(n) ? String(n) : n > 0 ? "+Inf" : "-Inf")

/** Prometheus text exposition (version 0.0.4) of metric pairs, grouped by metric name. */
export const renderPrometheus = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>, gauges: ReadonlyArray<Gauge> = []) => {
  const byName = new Map<string, Array<MetricPair.MetricPair.Untyped>>()
  for (const pair of pairs) {
    const name = pair.metricKey.name
    if (!/^sophia_/.test(name)) continue
    byName.set(name, [...(byName.get(name) ?? []), pair])
  }
  const lines: Array<string> = []
  for (const [name, group] of [...byName].sort(([a], [b]) => a.localeCompare(b))) {
    const first = group[0]!
    const help = first.metricKey.description
    if (help._tag === "Some") lines.push(`# HELP ${name} ${help.value}`)
    const state = first.metricState
    if (MetricState.isCounterState(state)) lines.push(`# TYPE ${name} counter`)
    else if (MetricState.isHistogramState(state)) lines.push(`# TYPE ${name} histogram`)
    else if (MetricState.isGaugeState(state)) lines.push(`# TYPE ${name} gauge`)
    for (const pair of group) {
      const tags = pair.metricKey.tags.map((t) => [t.key, t.value] as const)
      const s = pair.metricState
      if (MetricState.isCounterState(s)) {
        lines.push(`${name}${labels(tags)} ${num(s.count)}`)
      } else if (MetricState.isGaugeState(s)) {
        lines.push(`${name}${labels(tags)} ${num(s.value)}`)
      } else if (MetricState.isHistogramState(s)) {
        // Effect's boundaries end with +Inf already; the exposition has exactly one +Inf bucket (= count)
        for (const [le, count] of s.buckets) {
          if (Number.isFinite(le)) lines.push(`${name}_bucket${labels([...tags, ["le", num(le)]])} ${count}`)
        }
        lines.push(`${name}_bucket${labels([...tags, ["le", "+Inf"]])} ${s.count}`)
        lines.push(`${name}_sum${labels(tags)} ${s.sum}`)
        lines.push(`${name}_count${labels(tags)} ${s.count}`)
      }
    }
  }
  for (const g of gauges) {
    lines.push(`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} gauge`, `${g.name} ${g.value}`)
  }
  return lines.join("\n") + "\n"
}

/** With an embeddings provider: the feed's backlog (rows not embedded yet, as last counted) and what it embedded. */
const embeddingGauges = (status: ReturnType<Embeddings["status"]>): ReadonlyArray<Gauge> =>
  status === undefined ? [] : [
    { name: "sophia_embedding_backlog", help: "documents, facts and posts not embedded yet", value: status.backlog },
    { name: "sophia_embeddings_written", help: "vectors this daemon's feed wrote since it started", value: status.embedded }
  ]

export interface Gauge {
  readonly name: string
  readonly help: string
  readonly value: number
}

/** What `/metrics` serves: the registry plus the gauges read now. */
export class MetricsScrape extends Context.Tag("sophia/MetricsScrape")<MetricsScrape, {
  /** `extra`: gauges only the caller knows (the transport's sessions) */
  readonly render: (extra?: ReadonlyArray<Gauge>) => Effect.Effect<string>
}>() {}

export const MetricsScrapeLive = Layer.effect(
  MetricsScrape,
  Effect.gen(function*() {
    const approvals = yield* Approvals
    const sandbox = yield* Sandbox
    const embeddings = yield* Embeddings
    return {
      render: (extra = []) =>
        Effect.gen(function*() {
          const pending = yield* approvals.pendingCount()
          const children = yield* sandbox.pids
          const pairs = yield* Metric.snapshot
          return renderPrometheus(pairs, [
            { name: "sophia_approvals_pending", help: "approvals waiting for the owner", value: pending },
            { name: "sophia_sandbox_children", help: "live execute_code child processes", value: children.length },
            ...embeddingGauges(embeddings.status()),
            ...extra
          ])
        })
    }
  })
)
