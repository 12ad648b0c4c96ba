/**
 * The retry key of a request (tools/RetryKey.ts): the same request gives the same key whatever
 * the order of its object keys; a change of the request id, the project, the method or any
 * argument gives another key; `_meta` does not count; the key's length does not grow with the id.
 */
import fc from "fast-check"
import { beforeAll, describe, expect, it } from "vitest"
import { canonicalJson, retryKey } from "../../src/tools/RetryKey.ts"

const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31)
beforeAll(() => console.log(`RetryKey: fast-check seed ${seed} (rerun with FC_SEED=${seed})`))

const json = fc.jsonValue()
const request = fc.record({
  requestId: fc.oneof(fc.string(), fc.integer()),
  project: fc.string(),
  method: fc.string(),
  params: fc.dictionary(fc.string(), json),
})

/** The same value with every object's keys in reverse insertion order. */
const reordered = (value: unknown): unknown => {
  if (value === null || typeof value !== "object") return value
  if (Array.isArray(value)) return value.map(reordered)
  const out: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value).reverse())
    Object.defineProperty(out, key, { value: reordered(item), enumerable: true, writable: true, configurable: true })
  return out
}

describe("retryKey", () => {
  it("ignores the order of object keys", () => {
    fc.assert(
      fc.property(request, (value) => {
        expect(retryKey("client-1", { ...value, params: reordered(value.params) })).toBe(retryKey("client-1", value))
      }),
      { seed },
    )
  })

  it("differs when the request id, project, method, arguments or client differ", () => {
    const base = {
      requestId: 1,
      project: "p",
      method: "tools/call",
      params: { name: "add_task", arguments: { title: "a" } },
    }
    const key = retryKey("client-1", base)
    expect(retryKey("client-2", base)).not.toBe(key)
    expect(retryKey("client-1", { ...base, requestId: "1" })).not.toBe(key)
    expect(retryKey("client-1", { ...base, requestId: 2 })).not.toBe(key)
    expect(retryKey("client-1", { ...base, project: "q" })).not.toBe(key)
    expect(retryKey("client-1", { ...base, method: "prompts/get" })).not.toBe(key)
    expect(retryKey("client-1", { ...base, params: { name: "add_task", arguments: { title: "b" } } })).not.toBe(key)
    expect(retryKey("client-1", { ...base, params: { ...base.params, _meta: { progressToken: 5 } } })).toBe(key)
  })

  it("has a bounded length, however long the request id", () => {
    const key = retryKey("c".repeat(128), { requestId: "x".repeat(100_000), project: "p", method: "m", params: {} })
    expect(key.length).toBeLessThanOrEqual(128 + 1 + 43)
  })

  it("canonical JSON parses back to the value JSON itself carries", () => {
    fc.assert(
      fc.property(json, (value) => {
        // Compared through JSON.stringify: JSON has no -0 (both write it as 0, and a request's
        // -0 and 0 are one number to every tool).
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)))
      }),
      { seed },
    )
  })
})
