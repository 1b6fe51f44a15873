import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { toJsonSchema } from "../src/mcp/JsonSchema.js"

describe("toJsonSchema", () => {
  it("strips $schema and $id, and inlines every $ref", () => {
    const Item = Schema.Struct({ id: Schema.String, extra: Schema.Unknown }).annotations({ identifier: "Item" })
    const schema = Schema.Struct({ a: Item, b: Schema.Array(Item), c: Schema.Unknown, d: Schema.Object })
    const json = toJsonSchema(schema)
    const text = JSON.stringify(json)
    for (const forbidden of ["$schema", "$ref", "$defs", "$id"]) assert.notInclude(text, forbidden)
    const props = json.properties as any
    assert.deepStrictEqual(props.a.required, ["id", "extra"])
    assert.strictEqual(props.b.items.properties.id.type, "string")
  })
})
