import type { Working } from "../../domain/LedgerCore.js"

/**
 * The state in hand at the last head this process wrote on each work item (see `commit`), with the
 * names of the fields and reviews it knows (present, or known to be absent). Bounded: the least
 * recently moved items go first.
 *
 * Why it is sound: the state at a head is a pure function of the chain that ends there (the fold of its
 * events; `verify` proves the tables hold exactly that), so the state this process computed when it
 * wrote a head is the state at that head for good. An append whose expected head is in hand needs no
 * read: the compare-and-swap on that head decides, here or in any other process on the same database.
 */
export interface InHand {
  readonly head: string
  readonly state: Working
  readonly fields: ReadonlySet<string>
  readonly reviews: ReadonlySet<string>
}

/** A state taken from the hand: a copy to fold onto, and the entry it came from. */
export interface Taken {
  readonly head: string
  readonly state: Working
  readonly known: InHand
}

const IN_HAND_MAX = 4096

const isSubset = (a: ReadonlySet<string>, b: ReadonlySet<string>) => {
  for (const x of a) if (!b.has(x)) return false
  return true
}

const handKey = (userId: string, workId: string) => `${userId}\u0000${workId}`

export const makeInHand = () => {
  const hands = new Map<string, InHand>()

  /** A copy of the state at `expected`, when in hand with everything the drafts touch known. */
  const take = (
    userId: string,
    workId: string,
    expected: string,
    names: ReadonlySet<string>,
    ids: ReadonlySet<string>
  ): Taken | undefined => {
    const known = hands.get(handKey(userId, workId))
    if (known === undefined || known.head !== expected) return undefined
    if (!isSubset(names, known.fields) || !isSubset(ids, known.reviews)) return undefined
    // `applyEvent` works in place: fold onto a copy (fields and reviews are replaced, never mutated)
    const s = known.state
    return {
      head: expected,
      state: { ...s, workers: [...s.workers], fields: { ...s.fields }, reviews: { ...s.reviews } },
      known
    }
  }

  /** Keep the state just written at its head, knowing the names it read and touched (and those it knew). */
  const keep = (
    userId: string,
    workId: string,
    state: Working,
    names: ReadonlySet<string>,
    touchedFields: ReadonlySet<string>,
    ids: ReadonlySet<string>,
    touchedReviews: ReadonlySet<string>,
    from: Taken | undefined
  ) => {
    const key = handKey(userId, workId)
    // the known names grow only: the sets in hand are shared (never changed) while nothing is new
    const union = (known: ReadonlySet<string> | undefined, ...more: Array<ReadonlySet<string>>): ReadonlySet<string> => {
      if (known !== undefined && more.every((m) => isSubset(m, known))) return known
      const all = new Set(known)
      for (const m of more) for (const n of m) all.add(n)
      return all
    }
    const fields = union(from?.known.fields, names, touchedFields)
    const reviews = union(from?.known.reviews, ids, touchedReviews)
    hands.delete(key)
    if (hands.size >= IN_HAND_MAX) hands.delete(hands.keys().next().value!)
    hands.set(key, { head: state.head, state, fields, reviews })
  }

  return { take, keep } as const
}
