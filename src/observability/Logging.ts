/**
 * Logs go to stderr, always (stdout carries command output, and in stdio mode only MCP messages), one
 * line per record: `json` (one object per line, for collectors) or `pretty` (for people; colour only on a
 * terminal and never with NO_COLOR).
 */
import { Cause, FiberId, HashMap, Inspectable, List, Logger, LogLevel } from "effect"
import type { Layer } from "effect"

export type LogFormat = "json" | "pretty"
export const LOG_FORMATS: ReadonlyArray<LogFormat> = ["pretty", "json"]

const messageOf = (message: unknown): string => {
  const parts = Array.isArray(message) ? message : [message]
  return parts.map((p) => (typeof p === "string" ? p : Inspectable.toStringUnknown(p, 0))).join(" ")
}

const annotationsOf = (annotations: HashMap.HashMap<string, unknown>) => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of annotations) out[k] = v
  return out
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
    message: messageOf(message),
    ...annotationsOf(annotations),
    fiber: FiberId.threadName(fiberId)
  }
  const spanTimes = spansOf(spans, date.getTime())
  if (Object.keys(spanTimes).length > 0) record.spans = spanTimes
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

const formatValue = (v: unknown) => {
  const s = typeof v === "string" ? v : JSON.stringify(v) ?? String(v)
  return /[\s="]/.test(s) ? JSON.stringify(s) : s
}

const prettyLogger = (colour: boolean) =>
  Logger.make(({ annotations, cause, date, logLevel, message }) => {
    const level = logLevel.label.padEnd(5)
    const paint = (s: string) => (colour ? `${COLOURS[logLevel.label] ?? ""}${s}\x1b[0m` : s)
    const fields = Object.entries(annotationsOf(annotations)).map(([k, v]) => `${k}=${formatValue(v)}`)
    const head = `${date.toISOString().slice(11, 23)} ${paint(level)} ${messageOf(message)}`
    const line = [head, ...fields].join(" ")
    // a cause is the one exception to one line: its stack follows, indented
    write(Cause.isEmpty(cause) ? line : `${line}\n  ${Cause.pretty(cause).split("\n").join("\n  ")}`)
  })

/** Whether stderr may carry colour codes. */
export const stderrColour = () => process.stderr.isTTY === true && (process.env.NO_COLOR ?? "") === "" && process.env.TERM !== "dumb"

/** Replace the default logger with one writing `format` lines to stderr. */
export const loggerLayer = (format: LogFormat): Layer.Layer<never> =>
  Logger.replace(Logger.defaultLogger, format === "json" ? jsonLogger : prettyLogger(stderrColour()))

export const LOG_LEVELS = ["all", "trace", "debug", "info", "warning", "error", "fatal", "none"] as const
export type LogLevelName = typeof LOG_LEVELS[number]

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
