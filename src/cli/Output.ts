/**
 * What the CLI writes: no colour codes unless the stream is a terminal, and a failure as one line on
 * stderr (`sophia: <message>`, exit 1).
 */
import { Cause, Effect, Option } from "effect"
import type { Console } from "effect"

const ANSI = /\x1b\[[0-9;]*m/g
const colourOn = (stream: NodeJS.WriteStream) =>
  stream.isTTY === true && (process.env.NO_COLOR ?? "") === "" && process.env.TERM !== "dumb"
const plain = (colour: boolean) => (args: ReadonlyArray<unknown>) =>
  colour ? args : args.map((a) => (typeof a === "string" ? a.replace(ANSI, "") : a))

/** The console the commands print through: colour codes stripped where the stream is no terminal. */
export const cliConsole = (base: Console.Console): Console.Console => {
  const out = plain(colourOn(process.stdout))
  const err = plain(colourOn(process.stderr))
  return {
    ...base,
    log: (...args: ReadonlyArray<unknown>) => base.log(...out(args)),
    info: (...args: ReadonlyArray<unknown>) => base.info(...out(args)),
    error: (...args: ReadonlyArray<unknown>) => base.error(...err(args)),
    warn: (...args: ReadonlyArray<unknown>) => base.warn(...err(args))
  }
}

const oneLine = (s: string) => s.replace(ANSI, "").replace(/\s*\n\s*/g, " ").trim()

/** Report a failed command: expected failures in one line, defects too (the stack with --log-level debug). */
export const report = (cause: Cause.Cause<unknown>, debug: boolean) =>
  Effect.sync(() => {
    if (Cause.isInterruptedOnly(cause)) return
    process.exitCode = 1
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const error = failure.value
      const message = typeof error === "object" && error !== null && "message" in error ? String(error.message) : String(error)
      process.stderr.write(`sophia: ${oneLine(message)}\n`)
      return
    }
    const defect = Cause.squash(cause)
    const message = defect instanceof Error ? defect.message : String(defect)
    process.stderr.write(
      `sophia: internal error: ${oneLine(message)}${debug ? `\n${Cause.pretty(cause)}` : " (--log-level debug shows the stack)"}\n`
    )
  })
