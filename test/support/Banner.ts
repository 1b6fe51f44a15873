/** The first-start banner's client entries, read back and started as a client would start them. */
import { assert } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"

/** The banner's stdio `mcpServers` entry (the second JSON block it prints). */
export const stdioEntry = (banner: string) => {
  const blocks = [...banner.matchAll(/^ {4}\{\n[\s\S]*?\n {4}\}$/gm)].map((m) => JSON.parse(m[0]))
  const entry = blocks.find((b) => b.mcpServers?.sophia?.command !== undefined)
  assert.isDefined(entry, `a stdio entry in:\n${banner}`)
  return entry.mcpServers.sophia as { command: string; args: Array<string>; env: Record<string, string> }
}

/** Start the entry exactly as a client would, and call orient through it. */
export const orientThrough = async (entry: { command: string; args: Array<string>; env: Record<string, string> }) => {
  const transport = new StdioClientTransport({ command: entry.command, args: entry.args, env: entry.env, stderr: "pipe" })
  const client = new Client({ name: "pasted", version: "1.0.0" })
  await client.connect(transport)
  try {
    const r = await client.callTool({ name: "sophia_orient", arguments: {} })
    return r.structuredContent as { connection_id: string; profile: string }
  } finally {
    await client.close()
  }
}
