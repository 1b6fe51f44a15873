/**
 * Which recorded daemon serves this database now (`sophia portal`, `sophia setup`): each `sophia serve`
 * records its address (`Daemons`); one counts as live when its `/healthz` answers with the recorded
 * instance id (not some other process on that port).
 */
import { Effect } from "effect"
import type { DaemonAddress } from "../services/Daemons.js"
import { request } from "./Daemon.js"

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
