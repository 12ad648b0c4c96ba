/**
 * What a compaction keeps of values earlier versions wrote with content the rules no longer keep:
 * a record tombstone with its data, a message tombstone with its content, an audit entry quoting
 * a sticky note's text. Each store's `compactValue` drops the content and keeps the rest; live
 * values and other keys pass unchanged. (The kernel applies it to every value of the snapshot:
 * test/stores/Compaction.test.ts.)
 */
import { assert, describe, it } from "@effect/vitest"
import { messageKey } from "../../src/conversations/ConversationKeys.ts"
import { conversationStore } from "../../src/conversations/ConversationStore.ts"
import { defaultMetadata } from "../../src/conversations/Model.ts"
import { compactAuditValue, unnamedRecordKinds } from "../../src/engineering/AuditStore.ts"
import { recordStores } from "../../src/engineering/EngineeringStores.ts"
import { recordKey } from "../../src/engineering/RecordKeys.ts"
import { compactRecordValue, type StoredRecord } from "../../src/engineering/RecordStore.ts"

const noteId = "01JB0000000000000000000000"
const secret = "the old tombstone's text"

describe("compactValue", () => {
  it("the audit ledger's unnamed kinds are exactly the record kinds without namedBy", () => {
    const unnamed = recordStores.flatMap((store) => store.kinds.filter((kind) => kind.namedBy === undefined))
    assert.deepStrictEqual([...unnamedRecordKinds].sort(), unnamed.map((kind) => kind.name).sort())
  })

  it("a record tombstone that kept its data keeps none; a live record and other keys are unchanged", () => {
    const live: StoredRecord = {
      id: noteId,
      project: "p",
      kind: "pinned_file",
      unique: "src/a.ts",
      revision: 1,
      createdAt: 1,
      updatedAt: 1,
      createdBy: "a",
      updatedBy: "a",
      data: { path: "src/a.ts", note: secret },
    }
    const key = recordKey("p", "pinned_file", noteId)
    assert.strictEqual(compactRecordValue(key, live), live)
    const old = { ...live, revision: 2, deletedAt: 2, deletedBy: "a" }
    const kept = compactRecordValue(key, old) as StoredRecord
    assert.notInclude(JSON.stringify(kept), secret)
    assert.notInclude(JSON.stringify(kept), "src/a.ts")
    assert.deepStrictEqual(kept, {
      id: noteId,
      project: "p",
      kind: "pinned_file",
      revision: 2,
      createdAt: 1,
      updatedAt: 1,
      createdBy: "a",
      updatedBy: "a",
      deletedAt: 2,
      deletedBy: "a",
      data: {},
    })
    assert.strictEqual(compactRecordValue("n\u001fp\u001fpinned_file", 3), 3)
  })

  it("a message tombstone that kept its content keeps none, and the bytes it held", () => {
    const message = {
      message_id: "m1",
      session_id: "s",
      timestamp: 1,
      role: "user" as const,
      content: secret,
      revision: 1,
      updated_at: 1,
      metadata: { ...defaultMetadata, tags: ["t"] },
    }
    const key = messageKey(1, "p", "m1")
    const live = { project: "p", created_by: "a", message }
    assert.strictEqual(conversationStore.compactValue!(key, live), live)
    const kept = conversationStore.compactValue!(key, { ...live, deleted_at: 5 }) as Record<string, unknown>
    assert.notInclude(JSON.stringify(kept), secret)
    assert.strictEqual(kept.deleted_at, 5)
    assert.strictEqual(kept.dead_bytes, Buffer.byteLength(secret) + Buffer.byteLength(JSON.stringify(message.metadata)))
  })

  it("an audit entry quoting a sticky note's text keeps only its name and id; a task's title stays", () => {
    const entry = (kind: string, summary: string) => ({
      seq: 7,
      store: "notes",
      sourceSeq: 3,
      at: 1,
      project: "p",
      who: "a",
      tool: "remove_sticky_note",
      action: "deleted",
      kind,
      recordId: noteId,
      summary,
    })
    const key = "e\u001f0000000000z"
    assert.deepStrictEqual(compactAuditValue(key, entry("sticky_note", `deleted sticky note ${noteId}: ${secret}`)), {
      ...entry("sticky_note", ""),
      summary: `deleted sticky note ${noteId}`,
    })
    const task = entry("task", "deleted task #3: ship the release")
    assert.strictEqual(compactAuditValue(key, task), task)
    assert.strictEqual(compactAuditValue("p\u001fp\u001f0000000000z", 7), 7)
  })
})
