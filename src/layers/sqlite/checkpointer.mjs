/**
 * The WAL checkpointer of a SQLite store (see `checkpointsOffLoop` in ./Checkpoints.ts): a worker thread with
 * its own connection to the database file. It runs a PASSIVE checkpoint each time the main thread asks, so
 * the checkpoint's copying and fsyncs never run on the event loop. Plain JavaScript beside Checkpoints.ts
 * (copied to dist/layers/sqlite/ and beside the CLI's chunks in dist/cli/ by the build) so the same file
 * serves src/, dist/ and the bundled CLI.
 *
 * In:  `{ id, commits }` (checkpoint, then answer), or `"stop"` (close the connection and end the thread).
 * Out: `{ id, commits, busy, log, checkpointed }` (PRAGMA wal_checkpoint's row), or `{ id, commits, error }`.
 */
import Sqlite from "better-sqlite3"
import { parentPort, workerData } from "node:worker_threads"

const db = new Sqlite(workerData.filename, { fileMustExist: true, timeout: workerData.timeout })
// the same syncing as the writer's own checkpoints (a checkpoint fsyncs the WAL, then the database file)
db.pragma("synchronous = NORMAL")
// this connection never writes; its close must not checkpoint either (the main thread's close does that)
db.pragma("wal_autocheckpoint = 0")
const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)")

parentPort.on("message", (message) => {
  if (message === "stop") {
    db.close()
    parentPort.close()
    return
  }
  try {
    parentPort.postMessage({ id: message.id, commits: message.commits, ...checkpoint.get() })
  } catch (error) {
    parentPort.postMessage({ id: message.id, commits: message.commits, error: String(error) })
  }
})
