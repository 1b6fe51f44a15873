/**
 * `sophia portal`: a one-time login link for the owner's portal (10 minutes, one use), printed as the last
 * stdout line, on the address where a daemon serving this database listens — found in the database
 * (`Daemons`: each `sophia serve` records its address) and confirmed by that daemon's `/healthz`
 * answering with the recorded instance id. `--host`/`--port` override; `--logout-all` ends every portal
 * session first.
 */
import { Console, Effect, Layer } from "effect"
import { commandOn } from "../layers/Commands.js"
import { Daemons } from "../services/Daemons.js"
import { Portal } from "../services/Portal.js"
import { liveAddress } from "./LiveDaemon.js"
import { mintPublishes, mintServices } from "./Mint.js"
import type { Globals } from "./Store.js"
import { existingStoreOf } from "./Store.js"

export interface PortalOptions extends Globals {
  readonly host: string | undefined
  readonly port: number | undefined
  readonly logoutAll: boolean
}

const FALLBACK = { host: "127.0.0.1", port: 7337 }
const hostForUrl = (host: string) => (host.includes(":") ? `[${host}]` : host === "0.0.0.0" ? "127.0.0.1" : host)

export const portal = (o: PortalOptions) =>
  Effect.gen(function*() {
    const store = yield* existingStoreOf(o)
    const { base, note, token } = yield* Effect.provide(
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
      }),
      // Portal and Daemons, and what a mint needs (layers/Commands.ts): the first login link of a user mints the
      // connection its portal acts as (`ConnectionCreated`); a logout publishes nothing
      commandOn(store, Layer.merge(Portal.Default, Daemons.Default).pipe(Layer.provideMerge(mintServices)), mintPublishes)
    )
    if (note !== undefined) process.stderr.write(`sophia: ${note}\n`)
    yield* Console.log(`${base}/portal/login?token=${token}`)
  })

/** The runner of this module's programs (cli/Program.ts: one bundle, one Effect). */
export { runEffect } from "./RunEffect.js"
