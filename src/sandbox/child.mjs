// @ts-check
/**
 * The sandbox child process of `sophia.execute_code` (plain ESM so a fresh `npm ci` runs it without a
 * TypeScript loader). The daemon's Sandbox pool forks it with `--no-node-snapshot`; it talks to the
 * daemon only over IPC and runs one snippet at a time, each in a fresh isolated-vm isolate (a spare one
 * is prepared between runs). Only strings cross the isolate boundary: the snippet sees two plain
 * functions (ivm.Callback) captured in the bootstrap's closure and deleted from the global, never a
 * Reference, ExternalCopy or module; the daemon's Reference to the isolate's `settle` function stays on
 * this side.
 *
 * IPC, daemon → child: run {run, js, methods, timeoutMs}, results {run, batch}, abort {run}, ping {n}
 * child → daemon: ready, accepted {run}, calls {run, batch}, done {run, ok, out | error},
 * aborted {run, logs}, pong {n}. `accepted` is sent once the run's isolate is ready, just before the
 * snippet starts: the daemon starts the run's deadline then (the isolate's own timeout starts here too).
 * Host calls travel in batches, one crossing and one message each way per batch: `calls.batch` is the
 * JSON text `[[id, method, argsJson], …]` of the calls the snippet made in one microtask turn, in call
 * order; `results.batch` is `[[id, 1 | 0, body], …]`, the answers the daemon had ready together.
 */
import ivm from "isolated-vm"

const HEAP_MB = Number(process.argv[2] ?? "8")
const MAX_LOG_LINES = Number(process.argv[3] ?? "100")
const MAX_LOG_LINE_CHARS = Number(process.argv[4] ?? "1000")

/** Runs inside every isolate before agent code; its value is `settle`, which only the child holds. */
const BOOTSTRAP = String.raw`(function (call, log, MAX_LINES, MAX_CHARS) {
  "use strict";
  const stringify = JSON.stringify, parse = JSON.parse, apply = Reflect.apply;
  const mapGet = Map.prototype.get, mapSet = Map.prototype.set, mapDelete = Map.prototype.delete;
  const weakGet = WeakMap.prototype.get, weakSet = WeakMap.prototype.set;
  const ErrorCtor = Error, PromiseCtor = Promise, resolveP = Promise.resolve, thenP = Promise.prototype.then;
  const pending = new Map();
  const bridged = new WeakMap();
  let nextId = 0, methods = [], started = false, lines = 0;

  const fmt = (v) => {
    try {
      if (typeof v === "string") return v;
      if (v instanceof ErrorCtor) return String(v.stack || v);
      const s = stringify(v);
      return s === undefined ? String(v) : s;
    } catch (e) {
      try { return String(v) } catch (e2) { return "[unprintable]" }
    }
  };
  const write = (prefix) => (...args) => {
    if (lines > MAX_LINES) return;
    lines++;
    if (lines > MAX_LINES) { log("[further console output dropped]"); return }
    let line = prefix + args.map(fmt).join(" ");
    if (line.length > MAX_CHARS) line = line.slice(0, MAX_CHARS) + "…";
    log(line);
  };
  const consoleObject = Object.freeze({ log: write(""), info: write(""), debug: write(""), warn: write("warn: "), error: write("error: ") });

  // The calls of one microtask turn leave together: the first queues a flush behind the turn's other
  // jobs, each call appends "[id,method,args]" (strings only: no prototype of the snippet's can change
  // the batch), and the flush hands the whole batch to the child in one crossing.
  let outbox = "", flushQueued = false;
  const settled = apply(resolveP, PromiseCtor, [undefined]);
  const flush = () => {
    flushQueued = false;
    const batch = outbox;
    outbox = "";
    if (batch !== "") call("[" + batch + "]");
  };
  const invoke = (method, args) => new PromiseCtor((resolve, reject) => {
    let json;
    try { json = args === undefined ? "{}" : stringify(args) } catch (e) {
      reject(new TypeError("sophia." + method + ": arguments must be plain JSON (" + e.message + ")"));
      return;
    }
    if (typeof json !== "string") json = "{}";
    const id = ++nextId;
    // created here so its stack points at the agent's call site
    const site = new ErrorCtor("sophia." + method);
    apply(mapSet, pending, [id, { resolve, reject, method, site }]);
    outbox = (outbox === "" ? "" : outbox + ",") + "[" + id + "," + stringify(String(method)) + "," + stringify(json) + "]";
    if (!flushQueued) {
      flushQueued = true;
      apply(thenP, settled, [flush]);
    }
  });
  const methodOf = (key) => (args) => invoke(key, args);
  const sophia = new Proxy(Object.create(null), {
    get(_t, key) { return typeof key !== "string" || key === "then" ? undefined : methodOf(key) },
    has(_t, key) { return typeof key === "string" && methods.includes(key) },
    ownKeys() { return methods.slice() },
    getOwnPropertyDescriptor(_t, key) {
      return typeof key === "string" && methods.includes(key)
        ? { value: methodOf(key), writable: false, enumerable: true, configurable: true }
        : undefined;
    },
    set() { return false }, defineProperty() { return false }, deleteProperty() { return false },
    setPrototypeOf() { return false }
  });
  Object.defineProperty(globalThis, "sophia", { value: sophia, writable: false, configurable: false, enumerable: false });
  Object.defineProperty(globalThis, "console", { value: consoleObject, writable: true, configurable: true, enumerable: false });

  const finish = (value) => {
    let json;
    try { json = stringify(value === undefined ? null : value) } catch (e) {
      return fail(new TypeError("the returned value is not plain JSON: " + (e && e.message)));
    }
    return "1" + (json === undefined ? "null" : json);
  };
  const fail = (e) => {
    try {
      const id = e !== null && (typeof e === "object" || typeof e === "function") ? apply(weakGet, bridged, [e]) : undefined;
      if (id !== undefined) return "0" + stringify({ refusal_call: id, stack: String(e.stack) });
      if (e instanceof ErrorCtor) return "0" + stringify({ name: String(e.name), message: String(e.message), stack: String(e.stack) });
      return "0" + stringify({ name: "Error", message: "the snippet threw a non-Error value: " + fmt(e) });
    } catch (e2) {
      return "0" + stringify({ name: "Error", message: "the snippet threw an error that could not be reported" });
    }
  };
  Object.defineProperty(globalThis, "__sophia_start", {
    configurable: true, enumerable: false, writable: false,
    value: (methodsJson, fn) => {
      delete globalThis.__sophia_start;
      if (started) return "0" + stringify({ name: "Error", message: "started twice" });
      started = true;
      methods = parse(methodsJson);
      try { return apply(thenP, apply(resolveP, PromiseCtor, [fn()]), [finish, fail]) } catch (e) { return fail(e) }
    }
  });

  const settleOne = (id, ok, value) => {
    const p = apply(mapGet, pending, [id]);
    if (p === undefined) return;
    apply(mapDelete, pending, [id]);
    if (ok) { p.resolve(value); return }
    const error = value !== null && typeof value === "object" ? value : {};
    const err = p.site;
    const frames = String(err.stack).split("\n").slice(1).join("\n");
    err.name = "SophiaError";
    err.message = String(error.message);
    err.code = String(error.code);
    err.tool = "sophia." + p.method;
    const details = {};
    for (const k of Object.keys(error)) if (k !== "code" && k !== "message") details[k] = error[k];
    err.details = details;
    err.stack = "SophiaError: " + err.message + "\n" + frames;
    apply(weakSet, bridged, [err, id]);
    p.reject(err);
  };

  // the daemon's answers, as many as were ready together: "[[id, 1 | 0, body], …]" in the order they came
  return (batch) => {
    let entries;
    try { entries = parse(batch) } catch (e) { return }
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i];
      settleOne(entry[0], entry[1] === 1, entry[2] === undefined ? null : entry[2]);
    }
  };
})`

/** @typedef {{ isolate: ivm.Isolate, context: ivm.Context, settle: ivm.Reference<any>, run: number | undefined, aborted: boolean, logs: string[] }} Prepared */

/** @type {(m: unknown) => void} */
const send = (m) => {
  if (process.connected) process.send?.(m)
}

/** @returns {Promise<Prepared>} */
const prepare = async () => {
  const isolate = new ivm.Isolate({ memoryLimit: HEAP_MB })
  const context = await isolate.createContext()
  /** @type {Prepared} */
  const prep = { isolate, context, settle: /** @type {any} */ (undefined), run: undefined, aborted: false, logs: [] }
  // one batch of calls (JSON text, checked by the daemon entry by entry) → one IPC message
  const call = new ivm.Callback((/** @type {unknown} */ batch) => {
    if (prep.run === undefined || prep.aborted) return
    if (typeof batch !== "string") return
    send({ t: "calls", run: prep.run, batch })
    // the run now waits for the daemon: a good moment to build the next run's isolate (not while the
    // snippet is starting: building one holds this thread ~1–2 ms, which would delay the snippet's start)
    if (spare === undefined) setImmediate(prepareSpare)
  }, { ignored: true })
  const log = new ivm.Callback((/** @type {unknown} */ line) => {
    if (typeof line === "string" && prep.logs.length <= MAX_LOG_LINES) prep.logs.push(line.slice(0, MAX_LOG_LINE_CHARS + 1))
  }, { ignored: true })
  prep.settle = await context.evalClosure(
    `return (${BOOTSTRAP})($0, $1, $2, $3)`,
    [call, log, MAX_LOG_LINES, MAX_LOG_LINE_CHARS],
    { filename: "sophia-runtime.js", result: { reference: true } }
  )
  return prep
}

/** @type {Promise<Prepared> | undefined} */
let spare
const prepareSpare = () => {
  if (spare) return
  spare = prepare()
  // a failure surfaces in the run that takes this spare
  spare.catch(() => undefined)
}
/** @type {Prepared | undefined} */
let current
/** the run whose isolate is being prepared (an abort may arrive before it is accepted) @type {{ run: number, aborted: boolean } | undefined} */
let accepting

const dispose = (/** @type {Prepared} */ prep) => {
  try {
    if (!prep.isolate.isDisposed) prep.isolate.dispose()
  } catch {
    // already gone
  }
}

const errorOf = (/** @type {unknown} */ e) =>
  e instanceof Error ? { name: e.name, message: e.message, stack: e.stack ?? "" } : { name: "Error", message: String(e), stack: "" }

/** @param {{ run: number, js: string, methods: string[], timeoutMs: number }} msg */
const run = async (msg) => {
  const pending = spare ?? prepare()
  spare = undefined
  const ticket = { run: msg.run, aborted: false }
  accepting = ticket
  const prep = await pending.finally(() => {
    if (accepting === ticket) accepting = undefined
  })
  if (ticket.aborted) {
    // aborted (and confirmed) before it started: it never runs
    dispose(prep)
    setImmediate(prepareSpare)
    return
  }
  prep.run = msg.run
  current = prep
  send({ t: "accepted", run: msg.run })
  try {
    const source = `${msg.js}\n;__sophia_start(${JSON.stringify(JSON.stringify(msg.methods))}, __sophia_snippet__)`
    const script = await prep.isolate.compileScript(source, { filename: "snippet.js" })
    const out = await script.run(prep.context, { promise: true, timeout: msg.timeoutMs })
    if (!prep.aborted) send({ t: "done", run: msg.run, ok: true, out: typeof out === "string" ? out : null, logs: prep.logs })
  } catch (e) {
    if (!prep.aborted) {
      const error = errorOf(e)
      const kind = /memory limit/i.test(error.message)
        ? "memory"
        : /timed out/i.test(error.message)
        ? "timeout"
        : "error"
      send({ t: "done", run: msg.run, ok: false, kind, error, logs: prep.logs })
    }
  } finally {
    if (current === prep) current = undefined
    dispose(prep)
    // the next run's isolate (if no host call made room for it earlier), prepared while the daemon is busy
    // with this run's reply
    setImmediate(prepareSpare)
  }
}

process.on("message", (/** @type {any} */ msg) => {
  if (msg === null || typeof msg !== "object") return
  switch (msg.t) {
    case "run":
      run(msg).catch((e) => send({ t: "done", run: msg.run, ok: false, kind: "error", error: errorOf(e), logs: [] }))
      return
    case "results": {
      const prep = current
      if (!prep || prep.run !== msg.run || prep.aborted || prep.isolate.isDisposed) return
      try {
        prep.settle.applyIgnored(undefined, [String(msg.batch)])
      } catch {
        // the isolate went away meanwhile
      }
      return
    }
    case "abort": {
      const prep = current
      if (prep && prep.run === msg.run) {
        prep.aborted = true
        dispose(prep)
      } else if (accepting && accepting.run === msg.run) {
        accepting.aborted = true
      }
      send({ t: "aborted", run: msg.run, logs: prep?.logs ?? [] })
      return
    }
    case "ping":
      send({ t: "pong", n: msg.n })
      return
  }
})
// the daemon went away: so do we
process.on("disconnect", () => process.exit(0))

prepareSpare()
send({ t: "ready" })
