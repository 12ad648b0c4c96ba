/**
 * The generic record store (RecordStore.ts), the kernel of tasks, ADRs, notes, code history and
 * gates: its `decide`/`apply` on an in-memory state against a model (property test), and as a
 * real durable store actor (everything survives a reopen, events carry who and the tool).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, PubSub, Result, Schema } from "effect"
import fc from "fast-check"
import { ulid } from "ulid"
import { defaultStoreOptions, makeStore } from "../../src/actors/StoreActor.ts"
import { getByUnique, getRecord, listRecords } from "../../src/engineering/RecordQueries.ts"
import {
  defineKind,
  makeRecordStore,
  type RecordCommand,
  type RecordEvent,
  type RecordOp,
  type StoredRecord,
} from "../../src/engineering/RecordStore.ts"
import type { Entry, KeyRange, StoreWriter } from "../../src/stores/checkpoint/Checkpoint.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"

const noteKind = defineKind({
  name: "note",
  data: Schema.Struct({ text: Schema.String.check(Schema.isMinLength(1)), n: Schema.optionalKey(Schema.Int) }),
  title: (note) => note.text,
  text: (note) => [note.text],
})
const slotKind = defineKind({
  name: "slot",
  data: Schema.Struct({ name: Schema.String, value: Schema.Int }),
  uniqueBy: (slot) => slot.name,
  numbered: true,
  title: (slot) => slot.name,
  text: (slot) => [slot.name],
})
const store = makeRecordStore("records-test", [noteKind, slotKind])

/** A sorted in-memory state with the StoreWriter interface. */
const memoryState = (): StoreWriter => {
  const map = new Map<string, unknown>()
  const range = (r: KeyRange): Array<Entry> => {
    const keys = [...map.keys()].filter((key) => key >= r.start && key < r.end).sort()
    if (r.reverse === true) keys.reverse()
    return keys.slice(0, r.limit ?? keys.length).map((key) => ({ key, value: map.get(key) }))
  }
  return {
    get: (key) => map.get(key),
    getRange: range,
    count: (r) => range(r).length,
    put: (key, value) => void map.set(key, value),
    remove: (key) => void map.delete(key),
  }
}

/** Decides and applies one command at `now`; returns the reply records or the failure reason. */
const run = (state: StoreWriter, command: RecordCommand, now = 1_000) => {
  const decided = store.decide(command, state, { now })
  if (Result.isFailure(decided)) return { failure: decided.failure.reason, events: [] as Array<RecordEvent> }
  for (const event of decided.success.events) store.apply(Schema.decodeUnknownSync(store.eventSchema)(event), state)
  return { records: decided.success.reply.records, events: [...decided.success.events] }
}
const command = (...ops: Array<RecordOp>): RecordCommand => ({ project: "p", by: "alice", tool: "test_tool", ops })

describe("record store decide/apply", () => {
  it("creates revision 1 with id, times and author; events carry who, tool and title", () => {
    const state = memoryState()
    const { records, events } = run(state, command({ _tag: "Create", kind: "note", data: { text: "hi" } }), 5)
    const [note] = records!
    assert.strictEqual(note!.revision, 1)
    assert.strictEqual(note!.createdAt, 5)
    assert.strictEqual(note!.createdBy, "alice")
    assert.deepStrictEqual(note!.data, { text: "hi" })
    assert.deepStrictEqual(
      events.map((event) => [event.change, event.tool, event.title]),
      [["created", "test_tool", "hi"]],
    )
    assert.deepStrictEqual(getRecord(state, "p", noteKind, note!.id), note)
  })

  it("applies all operations or none: a failing later operation leaves nothing behind", () => {
    const state = memoryState()
    const outcome = run(
      state,
      command(
        { _tag: "Create", kind: "note", data: { text: "first" } },
        { _tag: "Update", kind: "note", id: "missing", patch: { text: "x" } },
      ),
    )
    assert.strictEqual(outcome.failure, "NotFound")
    assert.strictEqual(
      listRecords(state, { project: "p", kind: noteKind, newestFirst: false, limit: 10 }).records.length,
      0,
    )
  })

  it("later operations see earlier ones: create then update the same id in one command", () => {
    const state = memoryState()
    const n1 = ulid()
    const { records } = run(
      state,
      command(
        { _tag: "Create", kind: "note", id: n1, data: { text: "a" } },
        { _tag: "Update", kind: "note", id: n1, expectedRevision: 1, patch: { text: "b" } },
      ),
    )
    assert.deepStrictEqual(
      records!.map((record) => [record.revision, record.data.text]),
      [
        [1, "a"],
        [2, "b"],
      ],
    )
    assert.strictEqual(getRecord(state, "p", noteKind, n1)!.revision, 2)
  })

  it("refuses data that does not match the kind, an unknown kind and a bad project", () => {
    const state = memoryState()
    assert.strictEqual(run(state, command({ _tag: "Create", kind: "note", data: { text: "" } })).failure, "Invalid")
    assert.strictEqual(run(state, command({ _tag: "Create", kind: "nope", data: {} })).failure, "Invalid")
    assert.strictEqual(
      run(state, command({ _tag: "Create", kind: "note", id: "n1", data: { text: "x" } })).failure,
      "Invalid",
    )
    const bad = { ...command({ _tag: "Create", kind: "note", data: { text: "x" } }), project: "a\u0000b" }
    assert.strictEqual(run(state, bad).failure, "Invalid")
  })

  it("upserts by unique key, numbers per project, and frees the key on delete", () => {
    const state = memoryState()
    const first = run(state, command({ _tag: "Upsert", kind: "slot", data: { name: "a", value: 1 } })).records![0]!
    const again = run(state, command({ _tag: "Upsert", kind: "slot", data: { name: "a", value: 2 } })).records![0]!
    assert.strictEqual(again.id, first.id)
    assert.strictEqual(again.revision, 2)
    assert.strictEqual(first.number, 1)
    const b = run(state, command({ _tag: "Create", kind: "slot", data: { name: "b", value: 1 } })).records![0]!
    assert.strictEqual(b.number, 2)
    assert.strictEqual(
      run(state, command({ _tag: "Create", kind: "slot", data: { name: "a", value: 9 } })).failure,
      "Conflict",
    )
    run(state, command({ _tag: "Delete", kind: "slot", unique: "a" }))
    assert.strictEqual(getByUnique(state, "p", slotKind, "a"), undefined)
    const reborn = run(state, command({ _tag: "Create", kind: "slot", data: { name: "a", value: 3 } })).records![0]!
    assert.notStrictEqual(reborn.id, first.id)
    assert.strictEqual(reborn.number, 3)
  })

  it("deletes logically: the record stays with deletedAt/deletedBy and leaves lists", () => {
    const state = memoryState()
    const note = run(state, command({ _tag: "Create", kind: "note", data: { text: "x" } })).records![0]!
    run(state, command({ _tag: "Delete", kind: "note", id: note.id }), 9)
    assert.strictEqual(getRecord(state, "p", noteKind, note.id), undefined)
    const all = listRecords(state, {
      project: "p",
      kind: noteKind,
      newestFirst: false,
      limit: 10,
      includeDeleted: true,
    })
    assert.deepStrictEqual(
      all.records.map((record) => [record.deletedAt, record.deletedBy, record.revision]),
      [[9, "alice", 2]],
    )
    assert.strictEqual(run(state, command({ _tag: "Delete", kind: "note", id: note.id })).failure, "NotFound")
    assert.strictEqual(
      run(state, command({ _tag: "Update", kind: "note", id: note.id, patch: { text: "y" } })).failure,
      "NotFound",
    )
  })

  it("matches a model under random operations (revisions, conflicts, not-found, deletes)", () => {
    type Op =
      | { readonly type: "create"; readonly text: string }
      | { readonly type: "update"; readonly target: number; readonly text: string; readonly stale: boolean | null }
      | { readonly type: "delete"; readonly target: number; readonly stale: boolean | null }
    const text = fc.constantFrom("a", "b", "c")
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ type: fc.constant("create" as const), text }),
      fc.record({
        type: fc.constant("update" as const),
        target: fc.nat(5),
        text,
        stale: fc.option(fc.boolean(), { nil: null }),
      }),
      fc.record({
        type: fc.constant("delete" as const),
        target: fc.nat(5),
        stale: fc.option(fc.boolean(), { nil: null }),
      }),
    )
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
        const state = memoryState()
        const model: Array<{ id: string; text: string; revision: number; deleted: boolean }> = []
        for (const [step, op] of ops.entries()) {
          const now = 1_000 + step
          if (op.type === "create") {
            const { records } = run(state, command({ _tag: "Create", kind: "note", data: { text: op.text } }), now)
            model.push({ id: records![0]!.id, text: op.text, revision: 1, deleted: false })
            continue
          }
          const target = model[op.target]
          const id = target?.id ?? `missing-${op.target}`
          const expectedRevision =
            op.stale === null || target === undefined ? undefined : op.stale ? target.revision + 1 : target.revision
          const revision = expectedRevision === undefined ? {} : { expectedRevision }
          const outcome =
            op.type === "update"
              ? run(state, command({ _tag: "Update", kind: "note", id, patch: { text: op.text }, ...revision }), now)
              : run(state, command({ _tag: "Delete", kind: "note", id, ...revision }), now)
          if (target === undefined || target.deleted) {
            assert.strictEqual(outcome.failure, "NotFound")
            continue
          }
          if (op.stale === true) {
            assert.strictEqual(outcome.failure, "Conflict")
            continue
          }
          assert.isUndefined(outcome.failure)
          if (op.type === "delete") {
            target.deleted = true
            target.revision++
          } else if (op.text !== target.text) {
            target.text = op.text
            target.revision++
          }
        }
        const live = listRecords(state, { project: "p", kind: noteKind, newestFirst: false, limit: 500 }).records
        const expected = model.filter((entry) => !entry.deleted).map((entry) => [entry.id, entry.text, entry.revision])
        assert.deepStrictEqual(
          live.map((record) => [record.id, record.data.text, record.revision]),
          expected,
        )
        const newest = listRecords(state, { project: "p", kind: noteKind, newestFirst: true, limit: 500 }).records
        assert.deepStrictEqual(
          newest.map((record) => [record.id, record.data.text, record.revision]),
          [...expected].reverse(),
        )
      }),
    )
  })
})

describe("record store as a durable actor", () => {
  const storeLayer = Layer.merge(EventBus.layer, layerNode)
  const tempDir = Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "mnemos-records-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true })),
  )

  it.live("keeps records, unique keys and numbers across a reopen, and publishes its events", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const options = { ...defaultStoreOptions, dir }
      const created = yield* Effect.scoped(
        Effect.gen(function* () {
          const bus = yield* EventBus.EventBus
          const events = yield* bus.subscribe
          const actor = yield* makeStore(store, options)
          const reply = yield* actor.send(
            command(
              { _tag: "Create", kind: "note", data: { text: "durable" } },
              { _tag: "Upsert", kind: "slot", data: { name: "s", value: 1 } },
            ),
          )
          const published = yield* PubSub.takeAll(events)
          assert.deepStrictEqual(
            published.map((event) => [event.store, (event.event as RecordEvent).record.kind]),
            [
              ["records-test", "note"],
              ["records-test", "slot"],
            ],
          )
          return reply.records
        }),
      )
      yield* Effect.scoped(
        Effect.gen(function* () {
          const actor = yield* makeStore(store, options)
          const [note, slot] = created as ReadonlyArray<StoredRecord>
          assert.deepStrictEqual(yield* actor.read((view) => getRecord(view, "p", noteKind, note!.id)), note)
          assert.deepStrictEqual(yield* actor.read((view) => getByUnique(view, "p", slotKind, "s")), slot)
          const next = yield* actor.send(command({ _tag: "Create", kind: "slot", data: { name: "t", value: 2 } }))
          assert.strictEqual(next.records[0]!.number, 2)
        }),
      )
    }).pipe(Effect.provide(storeLayer)),
  )
})
