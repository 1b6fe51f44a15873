import { Clock, Effect, Schema } from "effect"

/** Now, as the ISO-8601 text every timestamp column and result uses (through Clock, so TestClock drives it). */
export const nowIso: Effect.Effect<string> = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

/** An integer column as it comes back: a number on SQLite, a string for BIGINT on Postgres. */
export const DbInt = Schema.Union(Schema.Number, Schema.NumberFromString)
