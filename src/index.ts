/**
 * Sophia as a library: the services and the layers that provide them, for another Effect app to call
 * directly without MCP.
 */
export * from "./domain/Access.js"
export * from "./domain/Auth.js"
export * from "./domain/Envelope.js"
export * from "./domain/Errors.js"
export { allToolSets, makeCore, ServeLive, ServicesLive, SophiaLive, SophiaTest, sqliteStore } from "./layers/App.js"
export { Dispatcher } from "./mcp/Dispatch.js"
export { Envelope } from "./mcp/Envelope.js"
export { defineTool, makeRegistry, ToolRegistry } from "./mcp/Registry.js"
export type { Tool, ToolContext } from "./mcp/Registry.js"
export { Auth } from "./services/Auth.js"
