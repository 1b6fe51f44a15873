/**
 * A local HTTP receiver for notifications: records every POST (headers, body, when) and answers as told — a
 * status per attempt, or never (a hanging request, for the kill -9 test).
 */
import * as http from "node:http"

export interface Received {
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
  readonly at: number
  readonly path: string
}

export interface Receiver {
  readonly url: string
  readonly received: Array<Received>
  /** the status of the n-th request (0-based), or "hang" to never answer */
  answer: (n: number, r: Received) => number | "hang"
  /** resolves once `count` requests arrived (or rejects after `timeoutMs`) */
  readonly waitFor: (count: number, timeoutMs?: number) => Promise<Array<Received>>
  readonly close: () => Promise<void>
}

export const startReceiver = (answer: Receiver["answer"] = () => 200, port = 0) =>
  new Promise<Receiver>((resolve, reject) => {
    const received: Array<Received> = []
    const waiters: Array<() => void> = []
    const hanging: Array<http.ServerResponse> = []
    const server = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c) => chunks.push(c))
      req.on("end", () => {
        const r: Received = { headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), at: Date.now(), path: req.url ?? "/" }
        const n = received.length
        received.push(r)
        for (const w of waiters.splice(0)) w()
        const status = receiver.answer(n, r)
        if (status === "hang") return void hanging.push(res)
        res.writeHead(status, { "content-type": "text/plain" }).end("ok")
      })
    })
    server.keepAliveTimeout = 1000
    const receiver: Receiver = {
      url: "",
      received,
      answer,
      waitFor: (count, timeoutMs = 15_000) =>
        new Promise((ok, fail) => {
          const deadline = setTimeout(() => fail(new Error(`received ${received.length} of ${count} within ${timeoutMs} ms`)), timeoutMs)
          const check = () => {
            if (received.length >= count) {
              clearTimeout(deadline)
              ok(received)
            } else waiters.push(check)
          }
          check()
        }),
      close: () =>
        new Promise((ok) => {
          for (const res of hanging) res.destroy()
          server.closeAllConnections()
          server.close(() => ok())
        })
    }
    server.once("error", reject)
    server.listen(port, "127.0.0.1", () => {
      const address = server.address() as { port: number }
      ;(receiver as { url: string }).url = `http://127.0.0.1:${address.port}/hook`
      resolve(receiver)
    })
  })

/** Verify `Sophia-Signature: t=<unix s>,v1=<hex>` over the body, as a receiver would (the README's snippet). */
export const verifySignature = async (secret: string, header: string | undefined, body: string) => {
  const { createHmac, timingSafeEqual } = await import("node:crypto")
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? "")
  if (!m) return false
  const expected = createHmac("sha256", secret).update(`${m[1]}.${body}`).digest()
  return timingSafeEqual(expected, Buffer.from(m[2], "hex"))
}
