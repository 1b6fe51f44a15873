/**
 * Logs go to stderr, always (stdout carries command output, and in stdio mode only MCP messages), one
 * line per record: `json` (one object per line, for collectors) or `pretty` (for people; colour only on a
 * terminal and never with NO_COLOR).
 */
import { Cause, FiberId, Inspectable, List, Logger, LogLevel } from "effect"
import type { Layer } from "effect"

import type { LogFormat, LogLevelName } from "./LogNames.js"

export { LOG_FORMATS, LOG_LEVELS } from "./LogNames.js"
export type { LogFormat, LogLevelName } from "./LogNames.js"

const messageOf = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  // the usual record: one string
  if (parts.length === 1 && typeof parts[0] === "string") return parts[0]
  return parts.map((p) => (typeof p === "string" ? p : Inspectable.toStringUnknown(p, 0))).join(" ")
}

const spansOf = (spans: List.List<{ readonly label: string; readonly startTime: number }>, now: number) => {
  const out: Record<string, string> = {}
  for (const span of spans) out[span.label] = `${now - span.startTime}ms`
  return out
}

const write = (line: string) => {
  process.stderr.write(line + "\n")
}

const jsonLogger = Logger.make(({ annotations, cause, date, fiberId, logLevel, message, spans }) => {
  const record: Record<string, unknown> = {
    time: date.toISOString(),
    level: logLevel.label,
    message: messageOf(message)
  }
  for (const [k, v] of annotations) record[k] = v
  record.fiber = FiberId.threadName(fiberId)
  if (List.isCons(spans)) record.spans = spansOf(spans, date.getTime())
  if (!Cause.isEmpty(cause)) record.cause = Cause.pretty(cause, { renderErrorCause: true })
  write(JSON.stringify(record))
})

const COLOURS: Record<string, string> = {
  FATAL: "\x1b[35m",
  ERROR: "\x1b[31m",
  WARN: "\x1b[33m",
  INFO: "\x1b[32m",
  DEBUG: "\x1b[36m",
  TRACE: "\x1b[90m"
}

// a value as `key=value` shows it: numbers as they are, strings bare unless they need quoting
const QUOTE = /[\s="]/
const formatValue = (v: unknown) => {
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : "null"
  const s = typeof v === "string" ? v : JSON.stringify(v) ?? String(v)
  return QUOTE.test(s) ? JSON.stringify(s) : s
}

const prettyLogger = (colour: boolean) => {
  // each level's label as printed (padded, painted), made once
  const labels = new Map<string, string>()
  const labelOf = (label: string) => {
    let text = labels.get(label)
    if (text === undefined) {
      const padded = label.padEnd(5)
      labels.set(label, text = colour ? `${COLOURS[label] ?? ""}${padded}\x1b[0m` : padded)
    }
    return text
  }
  return Logger.make(({ annotations, cause, date, logLevel, message }) => {
    let line = `${date.toISOString().slice(11, 23)} ${labelOf(logLevel.label)} ${messageOf(message)}`
    for (const [k, v] of annotations) line += ` ${k}=${formatValue(v)}`
    // a cause is the one exception to one line: its stack follows, indented
    write(Cause.isEmpty(cause) ? line : `${line}\n  ${Cause.pretty(cause).split("\n").join("\n  ")}`)
  })
}

/** Whether stderr may carry colour codes. */
export const stderrColour = () => process.stderr.isTTY === true && (process.env.NO_COLOR ?? "") === "" && process.env.TERM !== "dumb"

/** Replace the default logger with one writing `format` lines to stderr. */
export const loggerLayer = (format: LogFormat): Layer.Layer<never> =>
  Logger.replace(Logger.defaultLogger, format === "json" ? jsonLogger : prettyLogger(stderrColour()))


export const logLevelOf = (name: LogLevelName): LogLevel.LogLevel =>
  ({
    all: LogLevel.All,
    trace: LogLevel.Trace,
    debug: LogLevel.Debug,
    info: LogLevel.Info,
    warning: LogLevel.Warning,
    error: LogLevel.Error,
    fatal: LogLevel.Fatal,
    none: LogLevel.None
  })[name]
