/**
 * Search test harness: an engine on a temporary data directory (graph store only, so it starts
 * fast) with an MCP client in-process, and helpers to write graph records and call search tools.
 * `close()` shuts down like a process exit; opening the same directory again is a restart.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { assert } from "vitest"
import type * as Engine from "../../src/Engine.ts"
import { graphStore } from "../../src/graph/GraphStore.ts"
import { SearchIndexer } from "../../src/search/Indexer.ts"
import type { AnyStoreDefinition } from "../../src/stores/StoreDefinition.ts"
import { openEngineClient, type TestEngine } from "../support/engineClient.ts"

/** A running engine with a connected client, and its search indexer. */
export interface SearchEngine extends TestEngine {
  readonly indexer: () => Promise<SearchIndexer["Service"]>
}

const dirs: Array<string> = []

/** A fresh temporary directory, removed by `removeTempDirs`. */
export const tempDir = (): string => {
  const dir = mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), "mnemos-search-"))
  dirs.push(dir)
  return dir
}

export const removeTempDirs = (): void => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}

/**
 * Opens an engine on `dir` (the graph store, unless `stores` says) and connects a client; waits
 * until search is warm. Search runs in its worker thread, as in the daemon, unless `search` says.
 */
export const openSearchEngine = async (
  dir: string = tempDir(),
  search?: Engine.EngineConfig["search"],
  stores: ReadonlyArray<AnyStoreDefinition> = [graphStore],
): Promise<SearchEngine> => {
  const engine = await openEngineClient(dir, {
    clientName: "search-test",
    clientVersion: "0",
    stores,
    search: { thread: true, ...search },
  })
  const indexer = () =>
    engine.run(
      Effect.gen(function* () {
        return yield* SearchIndexer
      }),
    )
  await engine.run(
    Effect.gen(function* () {
      yield* (yield* SearchIndexer).awaitWarm
    }),
  )
  return { ...engine, indexer }
}

/** Score parts as hits and tool results report them. */
export interface ScoreParts {
  readonly fulltext: number
  readonly semantic: number
  readonly recency: number
  readonly importance: number
  readonly alignment: number
}

/** Asserts that a breakdown's parts add up to its score (within `tolerance`: tools round to 4 decimals). */
export const assertPartsAddUp = (parts: ScoreParts, score: number, tolerance: number): void => {
  assert.closeTo(parts.fulltext + parts.semantic + parts.recency + parts.importance + parts.alignment, score, tolerance)
}
