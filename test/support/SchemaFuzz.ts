/**
 * Fuzz inputs derived from a tool's advertised JSON Schema: fast-check arbitraries for the keywords the
 * surface uses (type, properties, required, additionalProperties, items, min/maxItems, enum, const, anyOf,
 * oneOf, pattern, min/maxLength, minimum, maximum, exclusiveMinimum/Maximum), then hostile mutations —
 * wrong types, missing and extra keys, `__proto__`, deep nesting, huge strings, lone surrogates, extreme
 * numbers, a root that is not an object. An input is JSON text, exactly what a transport receives.
 */
import fc from "fast-check"

type JsonSchema = Record<string, any>

/** Strings seen in successful replies (heads, ids, names): reusing them reaches past "not found". */
export class Dictionary {
  private readonly words: Array<string> = []
  private readonly seen = new Set<string>()
  add(word: string) {
    if (word.length > 0 && word.length <= 300 && !this.seen.has(word) && this.words.length < 5_000) {
      this.seen.add(word)
      this.words.push(word)
    }
  }
  /** harvest the string values of id-like keys from a reply */
  harvest(body: unknown) {
    const stack: Array<unknown> = [body]
    let budget = 10_000
    while (stack.length > 0 && budget-- > 0) {
      const v = stack.pop()
      if (Array.isArray(v)) stack.push(...v)
      else if (typeof v === "object" && v !== null) {
        for (const [k, x] of Object.entries(v)) {
          if (typeof x === "string" && /(^|_)(id|head|hash|name|cursor|channel|work_id|to|on|from|uri|sha256)$/.test(k)) this.add(x)
          else if (typeof x === "object") stack.push(x)
        }
      }
    }
  }
  pick(i: number): string | undefined {
    return this.words.length === 0 ? undefined : this.words[i % this.words.length]
  }
}

const EXTREME_NUMBERS = [0, -0, 1, -1, 2 ** 53 - 1, 2 ** 53 + 2, -(2 ** 53), 1e21, 1e308, -1e308, 5e-324, 0.1, 1.5, 2 ** 31, -(2 ** 31) - 1]
const AWKWARD_STRINGS = ["", " ", "\u0000", "\n", "😀", "é", "\u202e", "null", "0", "-1", "true", "[]", "{}", "__proto__", "constructor", "%", "../", "'; DROP TABLE posts; --", "a".repeat(129)]

const scalarString = (schema: JsonSchema, dict: Dictionary): fc.Arbitrary<string> => {
  const min = schema.minLength ?? 0
  const max = Math.min(schema.maxLength ?? 64, 64)
  const fits = (s: string) => s.length >= (schema.minLength ?? 0) && s.length <= (schema.maxLength ?? Infinity)
  const base = schema.pattern !== undefined
    ? fc.stringMatching(new RegExp(schema.pattern)).filter(fits)
    : fc.string({ minLength: Math.min(min, max), maxLength: Math.max(min, max), unit: "grapheme" })
  return fc.oneof(
    { arbitrary: base, weight: 6 },
    { arbitrary: fc.nat().map((i) => dict.pick(i) ?? "x"), weight: 3 },
    { arbitrary: fc.constantFrom(...AWKWARD_STRINGS), weight: 1 }
  )
}

/** An arbitrary of (mostly) valid values of a JSON Schema. */
export const arbitraryOf = (schema: JsonSchema, dict: Dictionary): fc.Arbitrary<unknown> => {
  if (schema === undefined || schema === null || typeof schema !== "object") return fc.jsonValue({ maxDepth: 3 })
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum)
  if ("const" in schema) return fc.constant(schema.const)
  const members = schema.anyOf ?? schema.oneOf
  if (Array.isArray(members)) return fc.oneof(...members.map((m: JsonSchema) => arbitraryOf(m, dict)))
  if (Array.isArray(schema.type)) return fc.oneof(...schema.type.map((t: string) => arbitraryOf({ ...schema, type: t }, dict)))
  switch (schema.type) {
    case "string":
      return scalarString(schema, dict)
    case "integer": {
      const min = schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : schema.minimum ?? -1_000
      const max = schema.exclusiveMaximum !== undefined ? schema.exclusiveMaximum - 1 : schema.maximum ?? 100_000
      return fc.oneof({ arbitrary: fc.integer({ min, max }), weight: 5 }, { arbitrary: fc.constantFrom(min, max), weight: 1 })
    }
    case "number":
      return fc.double({ noNaN: true, noDefaultInfinity: true, min: schema.minimum ?? -1e9, max: schema.maximum ?? 1e9 })
    case "boolean":
      return fc.boolean()
    case "null":
      return fc.constant(null)
    case "array":
      return fc.array(arbitraryOf(schema.items ?? {}, dict), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.max(schema.minItems ?? 0, Math.min(schema.maxItems ?? 4, 4))
      })
    case "object": {
      const props: Record<string, JsonSchema> = schema.properties ?? {}
      const required: Array<string> = schema.required ?? []
      const record = fc.record(
        Object.fromEntries(Object.entries(props).map(([k, s]) => [k, arbitraryOf(s, dict)])),
        { requiredKeys: required.filter((k) => k in props) }
      )
      if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
        return fc.tuple(record, fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }))
          .map(([r, extra]) => ({ ...extra, ...r }))
      }
      return record
    }
    default:
      return fc.jsonValue({ maxDepth: 3 })
  }
}

// ---------------------------------------------------------------------------------------------------
// Hostile mutations. The value is mutated in place on a copy; deep nesting and huge strings are spliced
// into the JSON text through a placeholder (so building them costs no recursion anywhere).

const PLACEHOLDER = "\u0001fuzz-splice\u0001"
const PLACEHOLDER_JSON = JSON.stringify(PLACEHOLDER)

type Splice = { readonly text: string }

/** Own enumerable `__proto__` (as JSON.parse makes it), not a prototype change. */
const setKey = (obj: Record<string, unknown>, key: string, value: unknown) =>
  Object.defineProperty(obj, key, { value, enumerable: true, configurable: true, writable: true })

/** The containers and their keys of a value (iteratively), to pick a place to mutate. */
const slotsOf = (root: unknown) => {
  const slots: Array<{ parent: Record<string, unknown> | Array<unknown>; key: string | number }> = []
  const stack: Array<unknown> = [root]
  while (stack.length > 0) {
    const v = stack.pop()
    if (Array.isArray(v)) v.forEach((x, i) => (slots.push({ parent: v, key: i }), stack.push(x)))
    else if (typeof v === "object" && v !== null) {
      for (const k of Object.keys(v)) {
        slots.push({ parent: v as Record<string, unknown>, key: k })
        stack.push((v as Record<string, unknown>)[k])
      }
    }
  }
  return slots
}

const deepText = (depth: number, kind: "array" | "object", leaf: string) =>
  kind === "array" ? "[".repeat(depth) + leaf + "]".repeat(depth) : '{"a":'.repeat(depth) + leaf + "}".repeat(depth)

export type Mutation =
  | "none"
  | "wrong_type"
  | "drop_key"
  | "extra_keys"
  | "proto"
  | "deep"
  | "huge_string"
  | "lone_surrogate"
  | "extreme_number"
  | "root"

const hostileValue = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1e308, "", "x", [], {}, [[]], { "": null }),
  fc.jsonValue({ maxDepth: 2 })
)

/** A mutation plan: which mutation, where (an index into the value's slots), and its parameters. */
export const mutationArb = fc.record({
  mutation: fc.constantFrom<Mutation>(
    "none",
    "none",
    "wrong_type",
    "drop_key",
    "extra_keys",
    "proto",
    "deep",
    "huge_string",
    "lone_surrogate",
    "extreme_number",
    "root"
  ),
  at: fc.nat(),
  value: hostileValue,
  depth: fc.oneof(fc.integer({ min: 15, max: 40 }), fc.integer({ min: 1_000, max: 20_000 })),
  kind: fc.constantFrom<"array" | "object">("array", "object"),
  size: fc.oneof(fc.integer({ min: 10_000, max: 100_000 }), fc.integer({ min: 900_000, max: 1_200_000 })),
  surrogate: fc.constantFrom("\ud800", "\udbff", "\udc00", "\udfff", "a\ud83d", "\ude00b"),
  number: fc.constantFrom(...EXTREME_NUMBERS),
  key: fc.constantFrom("__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "valueOf", "approval_id", "", "x".repeat(300))
})
export type MutationPlan = typeof mutationArb extends fc.Arbitrary<infer T> ? T : never

/** Apply a plan to a (copied) valid value: the JSON text a hostile client would send. */
export const mutate = (valid: unknown, plan: MutationPlan): { text: string; mutation: Mutation } => {
  const value = JSON.parse(JSON.stringify(valid ?? {})) as unknown
  let splice: Splice | undefined
  const slots = slotsOf(value)
  const slot = slots.length > 0 ? slots[plan.at % slots.length] : undefined
  const setSlot = (v: unknown) => {
    if (!slot) return false
    if (Array.isArray(slot.parent)) slot.parent[slot.key as number] = v
    else setKey(slot.parent, slot.key as string, v)
    return true
  }
  const objects = [value, ...slots.map((s) => (s.parent as any)[s.key])].filter(
    (v): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
  )
  const object = objects.length > 0 ? objects[plan.at % objects.length] : undefined
  switch (plan.mutation) {
    case "none":
      break
    case "wrong_type":
      if (!setSlot(plan.value) && object) setKey(object, "x", plan.value)
      break
    case "drop_key":
      if (object) {
        const keys = Object.keys(object)
        if (keys.length > 0) delete object[keys[plan.at % keys.length]]
      }
      break
    case "extra_keys":
      if (object) setKey(object, plan.key, plan.value)
      break
    case "proto":
      if (object) setKey(object, "__proto__", plan.value === null ? { polluted: true } : plan.value)
      break
    case "deep": {
      splice = { text: deepText(plan.depth, plan.kind, "1") }
      if (!setSlot(PLACEHOLDER) && object) setKey(object, "deep", PLACEHOLDER)
      break
    }
    case "huge_string":
      splice = { text: JSON.stringify("z".repeat(plan.size)) }
      if (!setSlot(PLACEHOLDER) && object) setKey(object, "huge", PLACEHOLDER)
      break
    case "lone_surrogate": {
      const strings = slots.filter((s) => typeof (s.parent as any)[s.key] === "string")
      if (strings.length > 0) {
        const s = strings[plan.at % strings.length]
        const current = (s.parent as any)[s.key] as string
        const cut = plan.at % (current.length + 1)
        ;(s.parent as any)[s.key] = current.slice(0, cut) + plan.surrogate + current.slice(cut)
      } else if (object) setKey(object, `k${plan.surrogate}`, plan.surrogate)
      break
    }
    case "extreme_number": {
      const numbers = slots.filter((s) => typeof (s.parent as any)[s.key] === "number")
      const target = numbers.length > 0 ? numbers[plan.at % numbers.length] : slot
      if (target) (target.parent as any)[target.key] = plan.number
      else if (object) setKey(object, "n", plan.number)
      break
    }
    case "root":
      return { text: JSON.stringify(plan.value === null || (typeof plan.value === "object" && !Array.isArray(plan.value)) ? 42 : plan.value), mutation: "root" }
  }
  let text = JSON.stringify(value)
  if (splice) text = text.replace(PLACEHOLDER_JSON, () => splice!.text)
  return { text, mutation: plan.mutation }
}

/** Inputs for one tool: a valid value from its schema and a mutation plan, as JSON text. */
export const inputArb = (schema: JsonSchema, dict: Dictionary) =>
  fc.tuple(arbitraryOf(schema, dict), mutationArb).map(([valid, plan]) => mutate(valid, plan))
