/**
 * Operations on the real daemon: `/metrics` counts tool calls (Prometheus text), and with
 * OTEL_EXPORTER_OTLP_ENDPOINT set a tool call arrives as a span over OTLP/HTTP with the service's span
 * under it (the test's HTTP server is the exporter's collector).
 */
import { assert, describe, it } from "@effect/vitest"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { tempDb } from "../support/Cli.js"
import { startDaemon } from "../support/Daemon.js"
import { restCall } from "../support/HeadHistory.js"

const metricValue = (text: string, name: string, labels: Record<string, string>) => {
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const got = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]))
    if (Object.entries(labels).every(([k, v]) => got[k] === v) && Object.keys(got).length === Object.keys(labels).length) {
      return Number(m[3])
    }
  }
  return 0
}

describe("operations", { timeout: 120_000 }, () => {
  it("/metrics counts a tool call by tool and outcome, with its latency", async () => {
    const daemon = await startDaemon(tempDb())
    try {
      const scrape = async () => {
        const r = await fetch(`${daemon.baseUrl}/metrics`)
        assert.strictEqual(r.status, 200)
        assert.match(r.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/)
        return r.text()
      }
      const before = await scrape()
      const ok = { tool: "sophia.orient", outcome: "ok" }
      assert.strictEqual(metricValue(before, "sophia_tool_calls_total", ok), 0)
      assert.strictEqual((await restCall(daemon.baseUrl, daemon.ownerBearer!, "sophia.orient", {})).status, 200)
      const refused = await restCall(daemon.baseUrl, daemon.ownerBearer!, "sophia.cancel_wait", { wait_id: "nope" })
      const code = refused.body.error.code as string
      const after = await scrape()
      assert.strictEqual(metricValue(after, "sophia_tool_calls_total", ok), 1)
      assert.strictEqual(metricValue(after, "sophia_tool_calls_total", { tool: "sophia.cancel_wait", outcome: code }), 1)
      assert.strictEqual(metricValue(after, "sophia_tool_call_duration_seconds_count", { tool: "sophia.orient" }), 1)
      assert.strictEqual(metricValue(after, "sophia_tool_call_duration_seconds_bucket", { tool: "sophia.orient", le: "+Inf" }), 1)
      // each series once: one +Inf bucket per label set (a duplicate sample is refused by Prometheus)
      const infLines = after.split("\n").filter((l) => l.startsWith("sophia_tool_call_duration_seconds_bucket{tool=\"sophia.orient\",le=\"+Inf\"}"))
      assert.strictEqual(infLines.length, 1)
      assert.include(after, "# TYPE sophia_tool_calls_total counter")
      assert.include(after, "# TYPE sophia_tool_call_duration_seconds histogram")
      for (const gauge of ["sophia_mcp_sessions", "sophia_approvals_pending", "sophia_sandbox_children"]) {
        assert.include(after, `# TYPE ${gauge} gauge`)
      }
      // no bearer needed, but only through the bound interface's names (DNS rebinding)
      const foreign = await new Promise<number>((resolve, reject) => {
        const url = new URL(`${daemon.baseUrl}/metrics`)
        http.get({ host: url.hostname, port: url.port, path: "/metrics", headers: { host: "evil.example" } }, (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        }).on("error", reject)
      })
      assert.strictEqual(foreign, 403)
    } finally {
      await daemon.kill("SIGTERM")
    }
  })

  it("/metrics times HTTP requests inside the daemon by route (MCP POSTs and REST calls; not the GET stream)", async () => {
    const daemon = await startDaemon(tempDb())
    try {
      const scrape = async () => (await fetch(`${daemon.baseUrl}/metrics`)).text()
      const count = (text: string, route: string) =>
        metricValue(text, "sophia_http_request_duration_seconds_count", { route })
      const before = await scrape()
      assert.strictEqual(count(before, "rest"), 0)
      assert.strictEqual(count(before, "mcp"), 0)
      assert.strictEqual((await restCall(daemon.baseUrl, daemon.ownerBearer!, "sophia.orient", {})).status, 200)
      // a refused call is a request all the same
      assert.strictEqual((await restCall(daemon.baseUrl, daemon.ownerBearer!, "sophia.cancel_wait", { wait_id: "nope" })).status, 404)
      const initialize = await fetch(`${daemon.baseUrl}/mcp`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${daemon.ownerBearer}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream"
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "metrics-test", version: "1" } }
        })
      })
      assert.strictEqual(initialize.status, 200)
      await initialize.text()
      const after = await scrape()
      assert.strictEqual(count(after, "rest"), 2)
      assert.strictEqual(count(after, "mcp"), 1)
      assert.strictEqual(metricValue(after, "sophia_http_request_duration_seconds_bucket", { route: "mcp", le: "+Inf" }), 1)
      assert.isAbove(metricValue(after, "sophia_http_request_duration_seconds_sum", { route: "rest" }), 0)
      assert.include(after, "# TYPE sophia_http_request_duration_seconds histogram")
    } finally {
      await daemon.kill("SIGTERM")
    }
  })

  it("with OTEL_EXPORTER_OTLP_ENDPOINT set, a tool call is a span with the service span under it", async () => {
    const bodies: Array<any> = []
    const collector = http.createServer((req, res) => {
      let text = ""
      req.on("data", (d) => (text += d))
      req.on("end", () => {
        if (req.url === "/v1/traces") bodies.push(JSON.parse(text))
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    await new Promise<void>((r) => collector.listen(0, "127.0.0.1", () => r()))
    const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`
    try {
      const daemon = await startDaemon(tempDb(), { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: "sophia-test" })
      const posted = await restCall(daemon.baseUrl, daemon.ownerBearer!, "sophia.coordination_post", {
        channel: "traced",
        kind: "status",
        body: "a traced post"
      })
      assert.strictEqual(posted.status, 200, JSON.stringify(posted.body))
      // the exporter flushes on shutdown
      assert.strictEqual(await daemon.kill("SIGTERM"), 0)
      const resourceSpans = bodies.flatMap((b) => b.resourceSpans ?? [])
      const serviceNames = resourceSpans.flatMap((r: any) =>
        (r.resource?.attributes ?? []).filter((a: any) => a.key === "service.name").map((a: any) => a.value.stringValue)
      )
      assert.include(serviceNames, "sophia-test")
      const spans = resourceSpans.flatMap((r: any) => r.scopeSpans.flatMap((s: any) => s.spans))
      const attr = (span: any, key: string) => span.attributes?.find((a: any) => a.key === key)?.value?.stringValue
      const call = spans.find((s: any) => s.name === "Dispatcher.call" && attr(s, "sophia.tool") === "sophia.coordination_post")
      assert.isDefined(call, `spans: ${spans.map((s: any) => s.name).join(", ")}`)
      assert.strictEqual(attr(call, "sophia.outcome"), "ok")
      const service = spans.find((s: any) => s.name === "Coordination.post")
      assert.isDefined(service, `spans: ${spans.map((s: any) => s.name).join(", ")}`)
      assert.strictEqual(service.traceId, call.traceId)
      // walk up from the service span: the tool call's span is an ancestor
      const byId = new Map(spans.map((s: any) => [s.spanId, s]))
      let cursor: any = service
      const chain: Array<string> = []
      while (cursor && cursor.spanId !== call.spanId) {
        chain.push(cursor.name)
        cursor = byId.get(cursor.parentSpanId)
      }
      assert.isDefined(cursor, `Coordination.post is not under the tool call's span (chain: ${chain.join(" < ")})`)
    } finally {
      collector.close()
    }
  })
})
