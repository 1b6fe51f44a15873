/**
 * The floor of an HTTP hook: a bare Node HTTP server on loopback that reads the JSON body, parses it and
 * answers `{}` — what an HTTP hook costs with nothing behind it. Prints its URL on stdout.
 */
import * as http from "node:http"

const server = http.createServer((req, res) => {
  const chunks = []
  req.on("data", (c) => chunks.push(c))
  req.on("end", () => {
    JSON.parse(Buffer.concat(chunks).toString("utf8"))
    const text = "{}"
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
    res.end(text)
  })
})
server.keepAliveTimeout = 65_000
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`http://127.0.0.1:${server.address().port}/hooks/claude-code\n`)
})
