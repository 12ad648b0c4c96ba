/**
 * An import commits every write made while it ran: messages written, updated and deleted, and
 * tombstones purged, before the copy, between its chunks, after it and after the staging, are all
 * in the generation the commit makes current — with every derived key (sessions, links, relations,
 * tombstones, counters) what the same writes and the imported records give without an import.
 * On the store's decide/apply over an in-memory state (property), and through the engine.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Exit, Result } from "effect"
import fc from "fast-check"
import { ulid } from "ulid"
import { afterAll, describe, expect, it } from "vitest"
import { Router } from "../../src/actors/Router.ts"
import { importConversations } from "../../src/conversations/ConversationImport.ts"
import { genPrefix, type StoredMessage, statsKey, wholeGen } from "../../src/conversations/ConversationKeys.ts"
import { type ConversationCommand, conversationStore } from "../../src/conversations/ConversationStore.ts"
import { exportConversations } from "../../src/conversations/ConversationTransfer.ts"
import { currentGen, type ImportRecord } from "../../src/conversations/Generations.ts"
import type { ConversationStoreHandle } from "../../src/conversations/Maintenance.ts"
import { erase, insertLive, readStored } from "../../src/conversations/MessageState.ts"
import { defaultMetadata } from "../../src/conversations/Model.ts"
import { openEngine, removeTempDirs } from "./engine.ts"
import { execute, MemoryState } from "./memoryState.ts"

afterAll(removeTempDirs)

type Live =
  | { readonly op: "write"; readonly project: string; readonly session: string; readonly text: string }
  | { readonly op: "update"; readonly pick: number; readonly text: string }
  | { readonly op: "delete"; readonly pick: number }
  | { readonly op: "purge" }
type Step = Live | { readonly op: "copy"; readonly keys: number }

const text = fc.constantFrom("alpha", "beta", "gamma delta", "ε")
const live: fc.Arbitrary<Live> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("write" as const),
      project: fc.constantFrom("a", "b"),
      session: fc.constantFrom("s1", "s2", "s3"),
      text,
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("update" as const), pick: fc.nat(), text }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("delete" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ op: "purge" as const }) },
)
const step: fc.Arbitrary<Step> = fc.oneof(
  live,
  fc.record({ op: fc.constant("copy" as const), keys: fc.integer({ min: 1, max: 3 }) }),
)

/** Imported records: ids from long ago (never a live write's), in sessions live writes use too. */
const imported: ReadonlyArray<ImportRecord> = [1, 2, 3, 4].map((index) => ({
  project: index % 2 === 0 ? "a" : "b",
  created_by: "import",
  message: {
    message_id: ulid(1_000_000 + index),
    session_id: index < 3 ? "s1" : "s3",
    timestamp: 1_000_000 + index,
    role: "user",
    content: `imported ${index}`,
    revision: 1,
    updated_at: 1_000_000 + index,
    metadata: { ...defaultMetadata, tags: [`t${index}`] },
  },
}))

const liveMessages = (state: MemoryState): Array<StoredMessage> => {
  const gen = currentGen(state)
  return [...state.getRange(wholeGen(gen))]
    .filter(({ key }) => key.startsWith(`${genPrefix(gen)}m\u0000`))
    .map(({ value }) => value as StoredMessage)
    .filter((stored) => stored.deleted_at === undefined && stored.created_by !== "import")
}

/**
 * Decides a live write on `state` and applies its events there and on `reference` (whose current
 * generation agrees: new ids are random, so both get the one decided).
 */
const runLive = (state: MemoryState, reference: MemoryState, op: Live, now: number) => {
  let command: ConversationCommand | undefined
  if (op.op === "write")
    command = {
      _tag: "Write",
      project: op.project,
      created_by: "agent",
      session_id: op.session,
      role: "assistant",
      content: op.text,
      metadata: { ...defaultMetadata, relations: [] },
    }
  else if (op.op === "purge") command = { _tag: "PurgeTombstones" }
  else {
    const messages = liveMessages(state)
    if (messages.length === 0) return
    const target = messages[op.pick % messages.length]!
    const id = target.message.message_id
    command =
      op.op === "update"
        ? { _tag: "Update", project: target.project, message_id: id, content: `${op.text} ${now}` }
        : { _tag: "Delete", project: target.project, message_id: id }
  }
  const decided = conversationStore.decide(command, state, { now })
  if (Result.isFailure(decided)) return
  for (const event of decided.success.events) {
    conversationStore.apply(event, state)
    conversationStore.apply(event, reference)
  }
}

/** The current generation's keys without its prefix; counters of operations and the changelog left out. */
const canonical = (state: MemoryState) => {
  const gen = currentGen(state)
  const prefix = genPrefix(gen)
  const out: Record<string, unknown> = {}
  for (const { key, value } of state.getRange(wholeGen(gen))) {
    const local = key.slice(prefix.length)
    if (local.startsWith("cl")) continue // the changelog
    if (key === statsKey(gen)) {
      const { writes: _w, updates: _u, changes: _c, epoch: _e, ...rest } = value as Record<string, unknown>
      out[local] = rest
    } else out[local] = value
  }
  return out
}

const ok = (state: MemoryState, command: ConversationCommand, now: number) => {
  const result = execute(state, command, now)
  if (Result.isFailure(result)) throw new Error(`${command._tag} failed: ${JSON.stringify(result.failure)}`)
  return result.success as { done?: boolean }
}

describe("an import while others write", () => {
  it("property: every write made meanwhile is in what the commit makes current, with every derived key", () => {
    fc.assert(
      fc.property(
        fc.array(live, { maxLength: 8 }),
        fc.array(step, { maxLength: 20 }),
        fc.array(live, { maxLength: 5 }),
        (before, during, afterStaging) => {
          const state = new MemoryState()
          const reference = new MemoryState()
          let now = 2_000_000_000_000
          const both = (op: Live) => {
            now += 1_000
            runLive(state, reference, op, now)
          }
          for (const op of before) both(op)
          ok(state, { _tag: "BeginImport", import_id: "i", base_changes: 0 }, now)
          let copied = false
          for (const next of during) {
            if (next.op !== "copy") both(next)
            else if (!copied)
              copied = ok(state, { _tag: "CopyChunk", import_id: "i", keys_max: next.keys }, now).done === true
          }
          while (!copied) copied = ok(state, { _tag: "CopyChunk", import_id: "i", keys_max: 2 }, now).done === true
          ok(state, { _tag: "StageImport", import_id: "i", policy: "overwrite", records: imported }, now)
          for (const op of afterStaging) both(op)
          ok(state, { _tag: "CommitImport", import_id: "i" }, now)

          // Without an import: the same writes, and the records stored as they are.
          const gen = currentGen(reference)
          for (const record of imported) {
            const existing = readStored(reference, gen, record.project, record.message.message_id)
            if (existing !== undefined) erase(reference, gen, existing)
            insertLive(reference, gen, record)
          }
          expect(canonical(state)).toEqual(canonical(reference))
        },
      ),
      { numRuns: 300 },
    )
  })

  it("an import through the engine keeps a message written, one updated and one deleted while it ran", async () => {
    const source = await openEngine()
    const file = join(source.dir, "backup.jsonl")
    await source.ok("write_message", { session_id: "old", role: "user", content: "from the backup" })
    await source.run(
      Effect.gen(function* () {
        const store = (yield* Router).store(conversationStore) as ConversationStoreHandle
        yield* exportConversations(store, file, {})
      }),
    )
    await source.close()
    expect(readFileSync(file, "utf8")).toContain("from the backup")

    const engine = await openEngine()
    try {
      const kept = (await engine.ok("write_message", { session_id: "live", role: "user", content: "to update" })).json
        .message.message_id
      const gone = (await engine.ok("write_message", { session_id: "live", role: "user", content: "to delete" })).json
        .message.message_id
      const store = await engine.run(
        Effect.gen(function* () {
          return (yield* Router).store(conversationStore) as ConversationStoreHandle
        }),
      )
      // The writes race the import's steps (each is its own command on the store's mailbox).
      const [exit] = await Promise.all([
        engine.run(Effect.exit(importConversations(store, file, { policy: "reject" }))),
        (async () => {
          for (let index = 0; index < 20; index++)
            await engine.ok("write_message", { session_id: "live", role: "assistant", content: `meanwhile ${index}` })
          await engine.ok("update_message", { message_id: kept, content: "updated meanwhile" })
          await engine.ok("delete_message", { message_id: gone })
        })(),
      ])
      expect(Exit.isSuccess(exit)).toBe(true)
      const history = (await engine.ok("read_messages", { session_id: "live", limit: 100 })).json.history as Array<{
        content: string
      }>
      const contents = history.map((message) => message.content)
      expect(contents).toContain("updated meanwhile")
      expect(contents).not.toContain("to delete")
      expect(contents.filter((content) => content.startsWith("meanwhile"))).toHaveLength(20)
      const old = (await engine.ok("read_messages", { session_id: "old", limit: 10 })).json.history as Array<{
        content: string
      }>
      expect(old.map((message) => message.content)).toEqual(["from the backup"])
      expect((await engine.ok("get_system_health", {})).json).toMatchObject({ active_messages: 22 })
    } finally {
      await engine.close()
    }
  })
})
