/**
 * The reliability suites run short in `npm test` (CI) and long in `npm run soak` (SOPHIA_SOAK=1).
 * Each figure can also be set on its own through the environment.
 */
export const SOAK = process.env.SOPHIA_SOAK === "1"

const int = (name: string, short: number, soak: number) => {
  const raw = process.env[name]
  const n = raw === undefined || raw === "" ? NaN : Number(raw)
  return Number.isInteger(n) && n > 0 ? n : SOAK ? soak : short
}

/** SIGKILL cycles of the crash-durability suite */
export const CRASH_CYCLES = int("SOPHIA_CRASH_CYCLES", 5, 50)
/** fuzz inputs per tool, each sent through the dispatcher and through the REST path */
export const FUZZ_RUNS = int("SOPHIA_FUZZ_RUNS", 200, 5000)
/** operations per client (8 clients) recorded against the real ledger for the linearizability check */
export const LINEARIZABILITY_OPS_PER_CLIENT = int("SOPHIA_LIN_OPS", 40, 1250)
/** a seed for everything random in the suites (printed, so a failure can be replayed) */
export const SEED = int("SOPHIA_SEED", Date.now() % 2_147_483_647, Date.now() % 2_147_483_647)

/** Print one figure line for bench/README.md. */
export const report = (suite: string, figures: Record<string, string | number>) =>
  console.log(`[reliability] ${suite}: ${Object.entries(figures).map(([k, v]) => `${k}=${v}`).join(" ")}`)
