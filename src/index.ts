/**
 * Sophia as a library: the services and the layers that provide them, for another Effect app to call
 * directly without MCP.
 */
export * from "./domain/Access.js"
export * from "./domain/Auth.js"
export * from "./domain/Coordination.js"
export * from "./domain/Catalog.js"
export * from "./domain/Envelope.js"
export * from "./domain/Errors.js"
export {
  allToolSets,
  EventWiring,
  makeCore,
  makeServices,
  PgLive,
  ServeLive,
  ServicesLive,
  SophiaLive,
  SophiaTest,
  SqliteLive,
  StoreChoice,
  storeLayer
} from "./layers/App.js"
export { CrossDaemonEvents } from "./layers/CrossDaemon.js"
export * from "./domain/Events.js"
export * from "./domain/Orient.js"
export { Events } from "./services/Events.js"
export type { SubscriberPolicy, Subscription } from "./services/Events.js"
export { Dispatcher } from "./mcp/Dispatch.js"
export type { CallOptions, CallOutcome } from "./mcp/Dispatch.js"
export { Envelope } from "./mcp/Envelope.js"
export { defineTool, makeRegistry, ToolRegistry } from "./mcp/Registry.js"
export type { Tool, ToolContext } from "./mcp/Registry.js"
export { Auth } from "./services/Auth.js"
export { Portal } from "./services/Portal.js"
export { Daemons } from "./services/Daemons.js"
export type { DaemonAddress } from "./services/Daemons.js"
export { Notifications } from "./services/Notifications.js"
export type { NotificationInfo, NotifyEvent, NotifyFormat, TargetInfo } from "./domain/Notifications.js"
export { Approvals } from "./services/Approvals.js"
export type { GateRequest } from "./services/Approvals.js"
export { Knowledge } from "./services/Knowledge.js"
export * from "./domain/Approvals.js"
export * from "./domain/Knowledge.js"
export { Coordination } from "./services/Coordination.js"
export { Catalog } from "./mcp/Catalog.js"
export { Ledger } from "./services/Ledger.js"
export {
  AppendEvent,
  Evidence,
  EvidenceDowngrade,
  HeadMoved,
  InvalidTransition,
  LEDGER_CONTRACT_HASH,
  LEDGER_CONTRACT_VERSION,
  LedgerEvent,
  SelfCertification,
  WorkState
} from "./domain/Ledger.js"
export { camelMapping, camelName, generateDeclarations } from "./mcp/SdkTypes.js"
export * from "./domain/Sandbox.js"
export { Sandbox, SandboxLive, SandboxTest, SandboxWarmUp } from "./services/Sandbox.js"
export type { SandboxHost, SandboxService } from "./services/Sandbox.js"
export * from "./domain/Waits.js"
export { Waits } from "./services/Waits.js"
export * from "./domain/Leases.js"
export { coverer, globsOverlap, parseResource } from "./domain/LeaseGlobs.js"
export type { ParsedResource } from "./domain/LeaseGlobs.js"
export { Leases } from "./services/Leases.js"
export { Orient } from "./services/Orient.js"
export { backupSqlite, DaemonLive, describeStore, EnvelopeLive, SophiaOn, StoreUnavailable } from "./layers/App.js"
export { HttpServer, ListenError } from "./mcp/Http.js"
export type { HttpConfig } from "./mcp/Http.js"
export { MetricsScrape, renderPrometheus, RequestLog, RequestLogOn } from "./observability/Metrics.js"
export { VERSION } from "./Version.js"
export { SweepLive } from "./layers/Sweep.js"
