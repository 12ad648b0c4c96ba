/**
 * The conversation tests' engine: the real stack in-process on a temporary data directory, with
 * an MCP client (test/support/engineClient.ts), the embedder's batches inline.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { AnyStoreDefinition } from "../../src/stores/StoreDefinition.ts"
import { openEngineClient, type TestEngine } from "../support/engineClient.ts"

export { parseResult, type Reply, type TestEngine } from "../support/engineClient.ts"

const tempDirs: Array<string> = []

/** A fresh temporary directory, removed by `removeTempDirs`. */
export const tempDir = (prefix = "mnemos-conv-"): string => {
  const dir = mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), prefix))
  tempDirs.push(dir)
  return dir
}

export const removeTempDirs = (): void => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}

/** Opens an engine on `dir` (a fresh directory by default) and connects a client. */
export const openEngine = (dir: string = tempDir(), stores?: ReadonlyArray<AnyStoreDefinition>): Promise<TestEngine> =>
  openEngineClient(dir, {
    clientName: "conversations-test",
    clientVersion: "0",
    ...(stores !== undefined ? { stores } : {}),
  })
