/**
 * The names of log levels and formats, apart from the logger itself: the CLI parses its flags with them
 * before it loads Effect (a command that never logs, like `sophia hook`, never loads it).
 */
export type LogFormat = "json" | "pretty"
export const LOG_FORMATS: ReadonlyArray<LogFormat> = ["pretty", "json"]

export const LOG_LEVELS = ["all", "trace", "debug", "info", "warning", "error", "fatal", "none"] as const
export type LogLevelName = typeof LOG_LEVELS[number]
