/**
 * `sophia portal`: a one-time login link for the owner's portal (10 minutes, one use), printed as the last
 * stdout line, on the address where a daemon serving this database listens — found in the database
 * (`Daemons`: each `sophia serve` records its address) and confirmed by that daemon's `/healthz`
 * answering with the recorded instance id. `--host`/`--port` override; `--logout-all` ends every portal
 * session first.
 */
import { Console, Effect } from "effect"
import type { DaemonAddress } from "../services/Daemons.js"
import { Portal } from "../services/Portal.js"
import { Daemons } from "../services/Daemons.js"
import { request } from "./Daemon.js"
import type { Globals } from "./Store.js"
import { existingStoreOf, withServices } from "./Store.js"

export interface PortalOptions extends Globals {
  readonly host: string | undefined
  readonly port: number | undefined
  readonly logoutAll: boolean
}

const FALLBACK = { host: "127.0.0.1", port: 7337 }
const PROBE_MS = 1500

/** Whether the daemon recorded at `address` answers there (and not some other process on that port). */
const answers = (address: DaemonAddress) =>
  Effect.tryPromise(async () => {
    const res = await request(`${address.base_url}/healthz`, { method: "GET", timeoutMs: PROBE_MS })
    const body = JSON.parse(res.text) as { instance?: unknown }
    return res.status === 200 && body.instance === address.instance_id
  }).pipe(Effect.orElseSucceed(() => false))

/** The first recorded daemon that answers, newest first (probed together: a dead one costs one timeout). */
export const liveAddress = (addresses: ReadonlyArray<DaemonAddress>) =>
  Effect.map(Effect.forEach(addresses, answers, { concurrency: "unbounded" }), (ok) => addresses.find((_, i) => ok[i]))

const hostForUrl = (host: string) => (host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host)

export const portal = (o: PortalOptions) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const { base, note, token } = yield* withServices(
      store,
      Effect.gen(function*() {
        const service = yield* Portal
        if (o.logoutAll) yield* Console.log(`logged out ${yield* service.logoutAll()} portal session(s)`)
        const login = yield* service.mintLogin()
        if (o.host !== undefined || o.port !== undefined) {
          const host = hostForUrl(o.host ?? FALLBACK.host)
          return { base: `http://${host}:${o.port ?? FALLBACK.port}`, note: undefined, token: login.token }
        }
        const recorded = yield* (yield* Daemons).addresses()
        const live = yield* liveAddress(recorded)
        if (live !== undefined) return { base: live.base_url, note: undefined, token: login.token }
        const last = recorded[0]
        return last === undefined
          ? {
            base: `http://${FALLBACK.host}:${FALLBACK.port}`,
            note: `no daemon has served this database yet; the link works once \`sophia serve\` listens on ${FALLBACK.host}:${FALLBACK.port} (or pass --host/--port)`,
            token: login.token
          }
          : {
            base: last.base_url,
            note: `no daemon answers for this database now; the link works once \`sophia serve\` listens at ${last.base_url} again (or pass --host/--port)`,
            token: login.token
          }
      }))
    if (note !== undefined) process.stderr.write(`sophia: ${note}\n`)
    yield* Console.log(`${base}/portal/login?token=${token}`)
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
