/**
 * The `sophia` CLI's entry: the command line parsed (cli/Program.ts), then the one command it names loaded
 * and run — an Effect program through its module's cli/RunEffect.ts (the logger its global flags chose), or a plain
 * one (`hook`, `watch`: no Effect loaded at all). A failure is one `sophia: …` line on stderr, exit 1.
 */
import { parseCommandLine } from "./cli/Program.js"

const fail = (message: string) => {
  process.stderr.write(`sophia: ${message.replace(/\s*\n\s*/g, " ").trim()}\n`)
  process.exitCode = 1
}

const parsed = parseCommandLine(process.argv)

if (parsed._tag === "Refused") fail(parsed.message)
else if (parsed._tag === "Run") {
  const { handler, logFormat, logLevel, options } = parsed
  if (handler._tag === "Effect") {
    handler.load().then(
      ({ run, runEffect }) => runEffect(run(options), logLevel, logFormat),
      (e) => fail(`internal error: ${e instanceof Error ? e.message : String(e)}`)
    )
  } else {
    handler.load().then((run) => run(options)).catch((e) => fail(e instanceof Error ? e.message : String(e)))
  }
}
