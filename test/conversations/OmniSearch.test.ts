/**
 * Conversation messages are searchable with every other store: omni_search finds a message right
 * after write_message acknowledges it, follows updates and deletes, and finds it again after a
 * restart (the search index is rebuilt from the store).
 */
import { afterAll, describe, expect, it } from "vitest"
import { openEngine, removeTempDirs } from "./engine.ts"

afterAll(removeTempDirs)

type Hit = { readonly id: string; readonly store: string }
const hitsOf = (structured: Record<string, unknown> | undefined): ReadonlyArray<Hit> =>
  (structured?.results as ReadonlyArray<Hit> | undefined) ?? []

describe("conversation messages in omni_search", () => {
  it("are found after write, follow update and delete, and survive a restart", async () => {
    const first = await openEngine()
    const written = await first.ok("write_message", {
      session_id: "s1",
      role: "user",
      content: "The flamingo migration script broke the billing ledger",
    })
    const id = written.json.message.message_id as string
    const found = await first.ok("omni_search", { query: "flamingo ledger", stores: ["conversations"] })
    expect(hitsOf(found.structured).map((hit) => hit.id)).toContain(id)

    await first.ok("update_message", { message_id: id, content: "The okapi cache warmed too slowly" })
    const afterUpdate = await first.ok("omni_search", { query: "okapi cache", stores: ["conversations"] })
    expect(hitsOf(afterUpdate.structured).map((hit) => hit.id)).toContain(id)
    const stale = await first.ok("omni_search", { query: "flamingo", stores: ["conversations"], mode: "lexical" })
    expect(hitsOf(stale.structured).map((hit) => hit.id)).not.toContain(id)

    const other = await first.ok("write_message", { session_id: "s2", role: "assistant", content: "Okapi notes kept" })
    const otherId = other.json.message.message_id as string
    await first.ok("delete_message", { message_id: otherId })
    await first.close()

    const second = await openEngine(first.dir)
    try {
      // The index warms in the background after a restart; wait (bounded) until it says it is warm.
      for (let attempt = 0; attempt < 200; attempt++) {
        if ((await second.ok("omni_search", { query: "okapi", mode: "lexical" })).structured?.warm === true) break
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      const again = await second.ok("omni_search", { query: "okapi", stores: ["conversations"], mode: "lexical" })
      const ids = hitsOf(again.structured).map((hit) => hit.id)
      expect(ids).toContain(id)
      expect(ids).not.toContain(otherId)
    } finally {
      await second.close()
    }
  })
})
