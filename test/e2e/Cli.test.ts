import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { sophia, SOPHIA, startServe, tempDb } from "../support/Cli.js"

const rest = (url: string, tool: string, bearer: string, body: unknown = {}) =>
  fetch(url.replace(/\/mcp$/, `/api/tools/${tool}`), {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })

describe("sophia CLI (real child processes)", { timeout: 180_000 }, () => {
  it("connection create prints one JSON object whose bearer works against a served daemon", async () => {
    const db = tempDb()
    const created = sophia(["connection", "create", "--name", "worker-1", "--profile", "assistant", "--db", db])
    assert.strictEqual(created.status, 0, created.stderr)
    const lines = created.stdout.trim().split("\n")
    assert.strictEqual(lines.length, 1, "exactly one line of JSON on stdout")
    const minted = JSON.parse(lines[0])
    assert.deepStrictEqual(Object.keys(minted).sort(), ["bearer", "connection_id", "name", "profile", "user_id"])
    assert.strictEqual(minted.name, "worker-1")
    assert.strictEqual(minted.profile, "assistant")
    const server = await startServe(db)
    try {
      // the database already had a user: no owner bearer is printed
      assert.notInclude(server.stdout(), "First start")
      const r = await rest(server.url, "sophia.orient", minted.bearer)
      assert.strictEqual(r.status, 200)
      const body = (await r.json()) as any
      assert.strictEqual(body.connection_id, minted.connection_id)
      assert.strictEqual(body.profile, "assistant")
      // list, rename and revoke through the CLI act on the same database the daemon serves
      const renamed = sophia(["connection", "rename", "worker-1", "worker-one", "--db", db])
      assert.strictEqual(renamed.status, 0, renamed.stderr)
      const again = (await (await rest(server.url, "sophia.orient", minted.bearer)).json()) as any
      assert.strictEqual(again.name, "worker-one")
      const listed = JSON.parse(sophia(["connection", "list", "--json", "--db", db]).stdout)
      // the agents' connections (every start mints a portal link: the portal's own row is labelled as such)
      assert.deepStrictEqual(listed.filter((c: any) => c.profile !== "portal").map((c: any) => c.name), ["worker-one"])
      assert.notInclude(JSON.stringify(listed), minted.bearer)
      const revoked = sophia(["connection", "revoke", minted.connection_id.slice(0, 8), "--db", db])
      assert.strictEqual(revoked.status, 0, revoked.stderr)
      const refused = await rest(server.url, "sophia.orient", minted.bearer)
      assert.strictEqual(refused.status, 401)
    } finally {
      const code = await server.stop("SIGTERM")
      assert.strictEqual(code, 0, "SIGTERM shuts down cleanly")
    }
  })

  it("first start on an empty database creates the owner, prints its bearer once and a client config", async () => {
    const db = tempDb()
    const server = await startServe(db)
    let bearer: string
    try {
      const out = server.stdout()
      const m = /(sph_[A-Za-z0-9_-]{43,})/.exec(out)
      assert.isNotNull(m)
      bearer = m![1]
      assert.include(out, server.url)
      assert.include(out, "mcpServers")
      assert.include(out, "claude mcp add")
      const r = (await (await rest(server.url, "sophia.orient", bearer)).json()) as any
      assert.strictEqual(r.profile, "full")
    } finally {
      await server.stop("SIGINT")
    }
    const second = await startServe(db)
    try {
      assert.notMatch(second.stdout(), /sph_/, "the bearer is printed once, on the first start only")
    } finally {
      await second.stop()
    }
  })

  it("refuses bad CLI input with a message and a non-zero exit", () => {
    const db = tempDb()
    const badProfile = sophia(["connection", "create", "--name", "x", "--profile", "root", "--db", db])
    assert.notStrictEqual(badProfile.status, 0)
    assert.strictEqual(sophia(["connection", "create", "--name", "x", "--profile", "full", "--db", db]).status, 0)
    const duplicate = sophia(["connection", "create", "--name", "x", "--profile", "full", "--db", db])
    assert.notStrictEqual(duplicate.status, 0)
    assert.include(duplicate.stderr, "already exists")
    const missing = sophia(["connection", "revoke", "nobody", "--db", db])
    assert.notStrictEqual(missing.status, 0)
    assert.include(missing.stderr, "nobody")
    assert.strictEqual(missing.stdout, "")
  })

  it("sophia stdio speaks MCP to the real SDK client, only MCP on stdout; both spellings work", async () => {
    const db = tempDb()
    const minted = JSON.parse(sophia(["connection", "create", "--name", "stdio-agent", "--profile", "observer", "--db", db]).stdout)
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [SOPHIA, "stdio", "--db", db],
      env: { ...(process.env as Record<string, string>), SOPHIA_BEARER: minted.bearer },
      stderr: "pipe"
    })
    const client = new Client({ name: "stdio-test", version: "1.0.0" })
    await client.connect(transport)
    try {
      const { tools } = await client.listTools()
      assert.include(tools.map((t) => t.name), "sophia_orient")
      for (const tool of tools) {
        assert.notInclude(JSON.stringify(tool.inputSchema), "$schema")
        assert.isDefined(tool.outputSchema)
        assert.isDefined(tool.annotations)
      }
      for (const name of ["sophia_orient", "sophia.orient"]) {
        const r = await client.callTool({ name, arguments: {} })
        assert.strictEqual((r.structuredContent as any).connection_id, minted.connection_id)
        assert.strictEqual((r.structuredContent as any).profile, "observer")
      }
      // revocation bites on the next call over stdio too
      sophia(["connection", "revoke", "stdio-agent", "--db", db])
      const after = await client.callTool({ name: "sophia_orient", arguments: {} })
      assert.isTrue(after.isError)
      assert.include(JSON.stringify(after.content), "unauthenticated")
    } finally {
      await client.close()
    }
  })

  it("sophia stdio refuses to start without a valid bearer", () => {
    const db = tempDb()
    assert.strictEqual(sophia(["connection", "create", "--name", "someone", "--profile", "full", "--db", db]).status, 0)
    const r = sophia(["stdio", "--db", db], { SOPHIA_BEARER: "sph_nope" })
    assert.notStrictEqual(r.status, 0)
    assert.strictEqual(r.stdout, "", "nothing but MCP ever goes to stdout")
    assert.include(r.stderr, "SOPHIA_BEARER")
  })
})
