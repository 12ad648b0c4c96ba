/**
 * Tools' input schemas are generated when `tools/list` first asks for them, not when the tools'
 * modules load (a start's first answer does not wait for them), and once: every later listing gets
 * the same schema.
 */
import { assert, describe, it } from "vitest"
import { catalogue } from "../../src/tools/Catalogue.ts"
import { officialToolNames } from "../../src/tools/officialToolDefinitions.ts"
import { withInputSchema } from "../../src/tools/Tool.ts"

describe("tools' input schemas", () => {
  it("are generated at the first read, once, and listed like any other field", () => {
    let generated = 0
    const definition = withInputSchema({ name: "t", description: "d" }, () => {
      generated++
      return { type: "object", properties: { a: { type: "string" } } }
    })
    assert.strictEqual(generated, 0)
    const listed = JSON.parse(JSON.stringify(definition)) as Record<string, unknown>
    assert.deepStrictEqual(listed, {
      name: "t",
      description: "d",
      inputSchema: { type: "object", properties: { a: { type: "string" } } },
    })
    assert.strictEqual(definition.inputSchema, definition.inputSchema)
    assert.strictEqual(generated, 1)
  })

  it("of every tool but the official graph tools' (fixed texts) are generated on demand, as object schemas", () => {
    const lazy = catalogue.filter(
      (tool) => Object.getOwnPropertyDescriptor(tool.definition, "inputSchema")?.get !== undefined,
    )
    const fixed = catalogue.filter((tool) => !lazy.includes(tool)).map((tool) => tool.definition.name)
    assert.deepStrictEqual(fixed, [...officialToolNames])
    for (const tool of lazy) assert.strictEqual(tool.definition.inputSchema.type, "object", tool.definition.name)
  })
})
