import type { Effect } from "effect"
import type { PayloadTooLarge, RateLimited, Unauthenticated } from "../../domain/Errors.js"
import type { ConnectionRevoked } from "../../domain/Events.js"
import type { ExecuteCodeInput, ExecuteCodeOutput } from "../../domain/Sandbox.js"
import type { InnerRefusal, SandboxCallCap, SandboxError, SandboxMemoryLimit, SandboxTimeout } from "../../domain/Sandbox.js"

/** What one inner call returned: the tool's body, or its refusal body (`{ error: { code, message, … } }`). */
export type HostOutcome =
  | { readonly ok: true; readonly body: Record<string, unknown> }
  | { readonly ok: false; readonly body: { readonly error: { readonly code: string; readonly message: string } } }

/** The caller's side of a run: every inner call goes through `invoke` (the dispatcher, as the caller). */
export interface SandboxHost {
  readonly invoke: (name: string, args: unknown) => Effect.Effect<HostOutcome>
  /** camelCase method → canonical tool name, by reflection over the registry */
  readonly methods: ReadonlyMap<string, string>
  /**
   * whose run it is: the connection's cap, the fair queue and revocation apply to it. Absent (an embedder
   * running its own snippets): no cap, and its runs queue as one anonymous connection.
   */
  readonly owner?: { readonly userId: string; readonly connectionId: string } | undefined
}

export type SandboxRunError =
  | SandboxTimeout
  | SandboxMemoryLimit
  | SandboxCallCap
  | SandboxError
  | InnerRefusal
  | PayloadTooLarge
  | RateLimited
  | Unauthenticated

export interface SandboxPoolOptions {
  /** warm child processes kept ready */
  readonly warm: number
  /**
   * child processes alive at most (= concurrent runs); further runs wait in a fair queue, and one user
   * holds at most max − 1 of them (when max > 1)
   */
  readonly max: number
  /** runs one connection may hold at once, queued or running; default SANDBOX_RUNS_PER_CONNECTION */
  readonly runsPerConnection?: number | undefined
  /** recycle a child after this many runs */
  readonly runsPerChild: number
  /** spawn the warm children when the layer is built (else on the first run) */
  readonly prewarm: boolean
  /** how long a child may take to confirm an abort before it is SIGKILLed */
  readonly abortGraceMs: number
  /**
   * how long a child may take to accept a run it was sent (the snippet's deadline starts at acceptance)
   * before it is SIGKILLed as hung; default ACCEPT_TIMEOUT_MS
   */
  readonly acceptTimeoutMs?: number | undefined
  /** extra Node flags for the child processes (tests preload a module that makes a cold start slow) */
  readonly childExecArgv?: ReadonlyArray<string> | undefined
}

/** How long a child may take to accept a run when the options do not say (see `acceptTimeoutMs`). */
export const ACCEPT_TIMEOUT_MS = 20_000

export interface SandboxService {
  /** Run a snippet; every inner call through `host`. Refusals in the error channel. */
  readonly run: (input: ExecuteCodeInput, host: SandboxHost) => Effect.Effect<ExecuteCodeOutput, SandboxRunError>
  /** pids of the live child processes (diagnostics, crash tests) */
  readonly pids: Effect.Effect<ReadonlyArray<number>>
  /** wait until `warm` children are ready (bench: cold start) */
  readonly warmUp: Effect.Effect<void>
  /**
   * A connection was revoked (the `ConnectionRevoked` event, wired in layers/App.ts): its runs end, their
   * calls in flight are interrupted and every later inner call of it is refused. Never fails.
   */
  readonly onConnectionRevoked: (event: ConnectionRevoked) => Effect.Effect<void>
  /** runs on children and runs waiting for one, right now (tests, diagnostics) */
  readonly load: Effect.Effect<{ readonly running: number; readonly queued: number }>
}
