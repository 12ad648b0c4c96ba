/**
 * Regression tests for a kernel bug found while building the engineering stores: lmdb-js
 * (ordered-binary) encodes a string key of 64 characters or more that contains bytes 0x00–0x03
 * differently from a shorter one, so such keys sorted apart and a prefix range read with shorter
 * bounds missed them — with U+0000-joined graph keys, deleting an entity left the relations whose
 * keys were long. Checkpoint.ts now stores keys as bytes it encodes itself (KeyCodec.ts). The
 * engineering stores join key components with U+001F anyway (RecordKeys.ts), safe either way.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { openCheckpoint } from "../../src/stores/checkpoint/Checkpoint.ts"
import { openEngine, removeTempDirs } from "./harness.ts"

const dir = mkdtempSync(join(tmpdir(), "mnemos-longkeys-"))
afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
  removeTempDirs()
})

describe("long keys with U+0000 separators", () => {
  it.live("a committed key of 64+ characters is found by its prefix range", () =>
    Effect.gen(function* () {
      const checkpoint = yield* openCheckpoint(join(dir, "lmdb"))
      const short = "e\u0000p\u0000short"
      const long = `e\u0000p\u0000${"x".repeat(70)}`
      yield* Effect.promise(() =>
        checkpoint.commit(
          [
            [short, 1],
            [long, 2],
          ],
          2,
          7,
        ),
      )
      const keys = [...checkpoint.view.getRange({ start: "e\u0000p\u0000", end: "e\u0000p\u0001" })].map(
        (entry) => entry.value,
      )
      yield* Effect.promise(() => checkpoint.close())
      assert.deepStrictEqual(keys, [1, 2])
    }),
  )

  it.live("delete_entities removes the relations of the deleted entity, also when their keys are long", () =>
    Effect.promise(async () => {
      const engine = await openEngine()
      const long = "An entity with a rather long descriptive name, about seventy chars"
      await engine.ok("create_entities", {
        entities: [
          { name: long, entityType: "t", observations: [] },
          { name: "short", entityType: "t", observations: [] },
        ],
      })
      await engine.ok("create_relations", { relations: [{ from: long, to: "short", relationType: "depends on" }] })
      // Let the LMDB commit happen (reads go to LMDB once the pending batch is committed).
      await new Promise((resolve) => setTimeout(resolve, 300))
      await engine.ok("delete_entities", { entityNames: ["short"] })
      const relations = (await engine.ok("read_graph", {})).structured.relations
      await engine.close()
      assert.deepStrictEqual(relations, [])
    }),
  )
})
