/**
 * A linearizability checker in the style of Wing & Gong, with Lowe's memoization, as Porcupine
 * (github.com/anishathalye/porcupine) implements it: histories are split by key (P-compositionality),
 * each partition is searched depth-first over the calls that may take effect next, and a (set of
 * linearized operations, model state) pair already explored is never explored again.
 */

/** One completed operation as a client saw it: what it asked, what it got, when it called and returned. */
export interface Operation<I, O> {
  readonly client: number
  readonly input: I
  readonly output: O
  /** invocation time (any monotonic clock shared by every client of the history) */
  readonly call: number
  /** completion time, ≥ call */
  readonly ret: number
}

/** A sequential specification. `step` returns the next state, or `undefined` when the output is impossible. */
export interface Model<S, I, O> {
  /** the partition an operation belongs to (operations of different partitions never interact) */
  readonly partition: (input: I) => string
  /** the state each partition starts from */
  readonly init: (partition: string) => S
  readonly step: (state: S, input: I, output: O) => S | undefined
  /** a key identifying a state (for the memo) */
  readonly key: (state: S) => string
}

export type CheckResult =
  | { readonly ok: true; readonly partitions: number; readonly operations: number }
  | {
    readonly ok: false
    readonly partition: string
    /** the most operations of that partition any search linearized before it got stuck */
    readonly linearized: number
    readonly operations: number
  }

interface Entry {
  readonly op: number
  readonly isCall: boolean
  readonly time: number
  /** the call's return entry */
  match: Entry | undefined
  prev: Entry | undefined
  next: Entry | undefined
}

/** Remove a call and its return from the list (they are linearized). */
const lift = (call: Entry) => {
  call.prev!.next = call.next
  call.next!.prev = call.prev
  const ret = call.match!
  ret.prev!.next = ret.next
  if (ret.next) ret.next.prev = ret.prev
}

/** Put them back, in reverse order of `lift`. */
const unlift = (call: Entry) => {
  const ret = call.match!
  ret.prev!.next = ret
  if (ret.next) ret.next.prev = ret
  call.prev!.next = call
  call.next!.prev = call
}

const checkPartition = <S, I, O>(model: Model<S, I, O>, name: string, ops: ReadonlyArray<Operation<I, O>>) => {
  // the history as one time-ordered list; at equal times calls come first (the more permissive reading)
  const events: Array<Entry> = []
  ops.forEach((o, i) => {
    const call: Entry = { op: i, isCall: true, time: o.call, match: undefined, prev: undefined, next: undefined }
    const ret: Entry = { op: i, isCall: false, time: o.ret, match: undefined, prev: undefined, next: undefined }
    call.match = ret
    events.push(call, ret)
  })
  events.sort((a, b) => a.time - b.time || (a.isCall === b.isCall ? a.op - b.op : a.isCall ? -1 : 1))
  const head: Entry = { op: -1, isCall: false, time: -Infinity, match: undefined, prev: undefined, next: undefined }
  let last = head
  for (const e of events) {
    last.next = e
    e.prev = last
    last = e
  }

  const words = Math.ceil(ops.length / 32) || 1
  const linearized = new Uint32Array(words)
  const memo = new Set<string>()
  const memoKey = (state: S) => {
    let k = ""
    for (let w = 0; w < words; w++) k += linearized[w].toString(36) + ","
    return k + "|" + model.key(state)
  }
  const stack: Array<{ entry: Entry; state: S }> = []
  let state = model.init(name)
  let count = 0
  let best = 0
  let entry = head.next
  while (head.next !== undefined) {
    if (entry === undefined) throw new Error("linearizability: malformed history (a call without its return)")
    if (entry.isCall) {
      const op = ops[entry.op]
      const next = model.step(state, op.input, op.output)
      if (next !== undefined) {
        linearized[entry.op >>> 5] |= 1 << (entry.op & 31)
        const key = memoKey(next)
        if (!memo.has(key)) {
          memo.add(key)
          stack.push({ entry, state })
          state = next
          count++
          if (count > best) best = count
          lift(entry)
          entry = head.next
          continue
        }
        linearized[entry.op >>> 5] &= ~(1 << (entry.op & 31))
      }
      entry = entry.next
    } else {
      // a return whose call could not be placed: undo the last choice and try the next call after it
      const top = stack.pop()
      if (top === undefined) return { ok: false as const, linearized: best }
      state = top.state
      count--
      linearized[top.entry.op >>> 5] &= ~(1 << (top.entry.op & 31))
      unlift(top.entry)
      entry = top.entry.next
    }
  }
  return { ok: true as const }
}

/** Is the history linearizable with respect to the model? */
export const checkLinearizable = <S, I, O>(model: Model<S, I, O>, history: ReadonlyArray<Operation<I, O>>): CheckResult => {
  const partitions = new Map<string, Array<Operation<I, O>>>()
  for (const op of history) {
    if (!(op.ret >= op.call)) throw new Error(`linearizability: an operation returns before it is called (${op.call} > ${op.ret})`)
    const p = model.partition(op.input)
    let list = partitions.get(p)
    if (!list) partitions.set(p, list = [])
    list.push(op)
  }
  for (const [name, ops] of partitions) {
    const r = checkPartition(model, name, ops)
    if (!r.ok) return { ok: false, partition: name, linearized: r.linearized, operations: ops.length }
  }
  return { ok: true, partitions: partitions.size, operations: history.length }
}

// ---------------------------------------------------------------------------------------------------
// The ledger's head register: one head per work item, moved only by compare-and-swap.

export type HeadInput =
  | { readonly kind: "append"; readonly work_id: string; readonly expected: string | null }
  | { readonly kind: "read"; readonly work_id: string }

export type HeadOutput =
  | { readonly ok: true; readonly head: string | null }
  | { readonly ok: false; readonly actual: string | null }

/**
 * The model "compare-and-swap on the head": an append naming the current head succeeds and moves the head
 * to a new value; one naming any other head is refused with the current head as `actual`; a read returns
 * the current head.
 */
export const headRegister = (initial: (workId: string) => string | null): Model<string | null, HeadInput, HeadOutput> => ({
  partition: (input) => input.work_id,
  init: initial,
  key: (state) => state ?? "∅",
  step: (state, input, output) => {
    if (input.kind === "read") return output.ok && output.head === state ? state : undefined
    if (output.ok) return input.expected === state && output.head !== null && output.head !== state ? output.head : undefined
    return input.expected !== state && output.actual === state ? state : undefined
  }
})
