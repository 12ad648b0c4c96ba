/**
 * Every MCP session leaves one entry in the audit ledger naming the client (its MCP clientInfo)
 * and the transport, so the ledger says who was connected as well as what they changed.
 */
import { afterAll, describe, expect, it } from "vitest"
import { openEngine, removeTempDirs } from "../conversations/engine.ts"

afterAll(removeTempDirs)

type Entry = { readonly action: string; readonly who: string; readonly tool: string; readonly summary: string }

describe("session audit", () => {
  it("records the client's name, version and transport when a session starts", async () => {
    const engine = await openEngine()
    try {
      let entries: ReadonlyArray<Entry> = []
      for (let attempt = 0; attempt < 100 && entries.length === 0; attempt++) {
        const ledger = await engine.ok("query_audit", { project: "*" })
        entries = ((ledger.structured?.entries ?? []) as ReadonlyArray<Entry>).filter(
          (entry) => entry.action === "session_start",
        )
        if (entries.length === 0) await new Promise((resolve) => setTimeout(resolve, 50))
      }
      expect(entries).toHaveLength(1)
      expect(entries[0]!.tool).toBe("test")
      expect(entries[0]!.who).toBe("conversations-test/0")
      expect(entries[0]!.summary).toContain("MCP session started by")
    } finally {
      await engine.close()
    }
  })
})
