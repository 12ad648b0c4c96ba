/**
 * A POST's `Content-Type` is taken as JSON exactly when the MCP SDK's Streamable HTTP transport takes
 * it (src/transports/MediaType.ts replaces its helper): parameters and case aside, duplicate headers
 * joined by a comma refused.
 */
import { assert, describe, it } from "@effect/vitest"
import { isJsonContentType as sdkIsJsonContentType } from "@modelcontextprotocol/sdk/shared/mediaType.js"
import fc from "fast-check"
import { beforeAll } from "vitest"
import { isJsonContentType } from "../../src/transports/MediaType.ts"

const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31)
beforeAll(() => console.log(`MediaType: fast-check seed ${seed} (rerun with FC_SEED=${seed})`))

describe("a JSON Content-Type", () => {
  it("is told as the MCP SDK tells it", () => {
    const cases = [
      "application/json",
      "Application/JSON",
      "application/json; charset=utf-8",
      "application/json;charset=UTF-8",
      "application/json ; charset=utf-8",
      "application/json, text/plain",
      "application/json; charset=utf-8, application/json",
      "application/jsonx",
      "text/json",
      "application/json-seq",
      "application/vnd.api+json",
      "application/json; charset",
      "",
      ";",
      " application/json",
      undefined,
    ]
    for (const header of cases) assert.strictEqual(isJsonContentType(header), sdkIsJsonContentType(header), `${header}`)
    assert.isTrue(isJsonContentType("application/json; charset=utf-8"))
    assert.isFalse(isJsonContentType("application/json, text/plain"))
    const piece = fc.constantFrom(
      "application/json",
      "application",
      "/",
      "json",
      ";",
      ",",
      " ",
      "charset=utf-8",
      "=",
      '"',
      "x",
    )
    const header = fc.array(piece, { maxLength: 8 }).map((pieces) => pieces.join(""))
    fc.assert(
      fc.property(header, (value) => isJsonContentType(value) === sdkIsJsonContentType(value)),
      { seed, numRuns: 1000 },
    )
  })
})
