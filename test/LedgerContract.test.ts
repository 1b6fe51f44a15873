import { assert, describe, it } from "@effect/vitest"
import canonicalize from "canonicalize"
import { JSONSchema } from "effect"
import { createHash } from "node:crypto"
import { LEDGER_CONTRACT_HASH, LEDGER_CONTRACT_VERSION, LEDGER_HASH_DOMAIN, LedgerEvent } from "../src/domain/Ledger.js"
import { eventHash, jcs } from "../src/domain/LedgerHash.js"

/** The IEEE 754 double with the given bit pattern. */
const fromBits = (hex: string): number => {
  const view = new DataView(new ArrayBuffer(8))
  view.setBigUint64(0, BigInt("0x" + hex))
  return view.getFloat64(0)
}

describe("Ledger contract", () => {
  it("is frozen: the SHA-256 of the RFC 8785 form of its JSON Schema equals the pinned constant", () => {
    const schema = JSONSchema.make(LedgerEvent)
    const recomputed = createHash("sha256").update(canonicalize(schema)!).digest("hex")
    assert.strictEqual(
      recomputed,
      LEDGER_CONTRACT_HASH,
      `the ledger event contract changed (v${LEDGER_CONTRACT_VERSION}); if on purpose, bump LEDGER_CONTRACT_VERSION and set LEDGER_CONTRACT_HASH = "${recomputed}"`
    )
  })

  it("covers the vocabulary of the issue", () => {
    const schema = JSONSchema.make(LedgerEvent) as any
    const text = JSON.stringify(schema)
    for (const type of ["opened", "claimed", "released", "asserted", "observed", "review_requested", "review_verdict", "closed"]) {
      assert.include(text, `"${type}"`)
    }
  })

  it("hashes an event as sha256(domain ‖ parent ‖ JCS(event without hash))", () => {
    const body = {
      work_id: "w",
      seq: 2,
      parent: "a".repeat(64),
      type: "asserted" as const,
      data: { value: { b: 1, a: [1.5, "x"] }, field: "status" },
      evidence: "asserted" as const,
      actor: "c",
      at: "2026-01-01T00:00:00.000Z"
    }
    const expected = createHash("sha256").update(
      "sophia-ledger-v1\u0000" + "a".repeat(64) +
        `{"actor":"c","at":"2026-01-01T00:00:00.000Z","data":{"field":"status","value":{"a":[1.5,"x"],"b":1}},"evidence":"asserted","parent":"${"a".repeat(64)}","seq":2,"type":"asserted","work_id":"w"}`
    ).digest("hex")
    assert.strictEqual(LEDGER_HASH_DOMAIN, "sophia-ledger-v1\0")
    assert.strictEqual(eventHash(body), expected)
    // key order of the input does not matter; any change of content does
    const reordered = Object.fromEntries(Object.entries(body).reverse()) as typeof body
    assert.strictEqual(eventHash(reordered), expected)
    assert.notStrictEqual(eventHash({ ...body, seq: 3 }), expected)
    // the first event has no parent: the empty string is hashed in its place
    const first = { ...body, seq: 1, parent: null }
    const firstExpected = createHash("sha256").update("sophia-ledger-v1\u0000" + jcs(first)).digest("hex")
    assert.strictEqual(eventHash(first), firstExpected)
  })
})

describe("RFC 8785 vectors (canonicalize)", () => {
  it("serializes numbers as in RFC 8785 Appendix B", () => {
    const vectors: ReadonlyArray<readonly [string, string]> = [
      ["0000000000000000", "0"],
      ["8000000000000000", "0"],
      ["0000000000000001", "5e-324"],
      ["8000000000000001", "-5e-324"],
      ["7fefffffffffffff", "1.7976931348623157e+308"],
      ["ffefffffffffffff", "-1.7976931348623157e+308"],
      ["4340000000000000", "9007199254740992"],
      ["c340000000000000", "-9007199254740992"],
      ["4430000000000000", "295147905179352830000"],
      ["44b52d02c7e14af5", "9.999999999999997e+22"],
      ["44b52d02c7e14af6", "1e+23"],
      ["44b52d02c7e14af7", "1.0000000000000001e+23"],
      ["444b1ae4d6e2ef4e", "999999999999999700000"],
      ["444b1ae4d6e2ef4f", "999999999999999900000"],
      ["444b1ae4d6e2ef50", "1e+21"],
      ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
      ["3eb0c6f7a0b5ed8d", "0.000001"],
      ["41b3de4355555553", "333333333.3333332"],
      ["41b3de4355555554", "333333333.33333325"],
      ["41b3de4355555555", "333333333.3333333"],
      ["41b3de4355555556", "333333333.3333334"],
      ["41b3de4355555557", "333333333.33333343"],
      ["becbf647612f3696", "-0.0000033333333333333333"],
      ["43143ff3c1cb0959", "1424953923781206.2"]
    ]
    for (const [bits, expected] of vectors) {
      assert.strictEqual(canonicalize(fromBits(bits)), expected, `0x${bits}`)
    }
    // NaN and Infinity have no JSON form (RFC 8785 3.2.2.3)
    assert.throws(() => canonicalize(fromBits("7fffffffffffffff")))
    assert.throws(() => canonicalize(fromBits("7ff0000000000000")))
  })

  it("canonicalizes the RFC 8785 section 3.2.3 example (numbers, string escaping, literals)", () => {
    const input = JSON.parse(
      `{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\"\\/",
        "literals": [null, true, false]}`
    )
    const expected = `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA'B\\"\\\\\\\\\\"/"}`
    assert.strictEqual(canonicalize(input), expected)
    // and as UTF-8 bytes: € is e2 82 ac
    assert.include(Buffer.from(canonicalize(input)!, "utf8").toString("hex"), "e282ac24")
  })

  it("sorts properties by UTF-16 code units (RFC 8785 section 3.2.3)", () => {
    const input = {
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }
    const expected = "{" + [
      `"\\r":"Carriage Return"`,
      `"1":"One"`,
      `"\u0080":"Control"`,
      `"\u00f6":"Latin Small Letter O With Diaeresis"`,
      `"\u20ac":"Euro Sign"`,
      `"\ud83d\ude00":"Emoji: Grinning Face"`,
      `"\ufb33":"Hebrew Letter Dalet With Dagesh"`
    ].join(",") + "}"
    assert.strictEqual(canonicalize(input), expected)
  })

  it("is the identity on its own output (what makes replay reproduce hashes)", () => {
    const value = { z: [1e21, 0.1, -0, "é\u2028"], a: { y: null, x: true } }
    const once = canonicalize(value)!
    assert.strictEqual(canonicalize(JSON.parse(once)), once)
  })
})
