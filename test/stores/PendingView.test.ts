/**
 * The pending layer readers see between an acknowledgement and its LMDB commit: a range over it is
 * the committed range with the pending changes merged in (puts replace, removals hide), in order,
 * forward or reverse, limited — and it streams the committed side instead of loading it whole.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import {
  type Change,
  type Checkpoint,
  type Entry,
  type KeyRange,
  openCheckpoint,
  type StoreView,
} from "../../src/stores/checkpoint/Checkpoint.ts"
import { CommitQueue } from "../../src/stores/checkpoint/CommitQueue.ts"
import { Overlay } from "../../src/stores/checkpoint/Overlay.ts"
import { type ChangeSet, PendingView } from "../../src/stores/checkpoint/PendingView.ts"

/** A committed state in memory, ranged like LMDB (start inclusive, end exclusive); counts pulls. */
const memoryView = (entries: ReadonlyMap<string, unknown>) => {
  // Read on every call: a test may commit more into `entries` later, as LMDB would.
  const sortedKeys = () => [...entries.keys()].sort()
  let pulled = 0
  const view: StoreView = {
    get: (key) => entries.get(key),
    getRange: (range: KeyRange): Iterable<Entry> => ({
      *[Symbol.iterator]() {
        const inRange = sortedKeys().filter((key) => key >= range.start && key < range.end)
        if (range.reverse) inRange.reverse()
        let given = 0
        for (const key of inRange) {
          if (range.limit !== undefined && given >= range.limit) return
          pulled++
          given++
          yield { key, value: entries.get(key) }
        }
      },
    }),
    count: (range) => sortedKeys().filter((key) => key >= range.start && key < range.end).length,
  }
  return { view, pulled: () => pulled }
}

const key = fc.stringMatching(/^[a-e]{1,3}$/)
const committedState = fc.dictionary(key, fc.integer())
/** Up to `count` batches of changes; `undefined` removes the key. */
const pendingBatches = (count: number) =>
  fc.array(fc.array(fc.tuple(key, fc.option(fc.integer(), { nil: undefined })), { maxLength: 6 }), {
    maxLength: count,
  })
/** Per batch, whether it is handed over as a batch overlay's own index (`Overlay.release`). */
const asChangeSets = fc.array(fc.boolean(), { minLength: 5, maxLength: 5 })

const nothing: StoreView = { get: () => undefined, getRange: () => [], count: () => 0 }

/** `batch` as the kernel hands it to the pending layer: a list, or an overlay's released index. */
const handed = (batch: ReadonlyArray<Change>, asChangeSet: boolean): ReadonlyArray<Change> | ChangeSet => {
  if (!asChangeSet) return batch
  const overlay = new Overlay(nothing)
  for (const [changedKey, value] of batch) {
    if (value === undefined) overlay.remove(changedKey)
    else overlay.put(changedKey, value)
  }
  const released = overlay.release()
  assert.strictEqual(overlay.size, 0, "a released overlay keeps nothing")
  return released
}

describe("PendingView ranges", () => {
  it("equal the committed state with the pending changes applied, for any range, direction and limit", () => {
    fc.assert(
      fc.property(
        committedState,
        pendingBatches(4),
        asChangeSets,
        key,
        key,
        fc.boolean(),
        fc.option(fc.nat({ max: 8 }), { nil: undefined }),
        (committed, batches, changeSets, a, b, reverse, limit) => {
          const base = new Map(Object.entries(committed))
          const pending = new PendingView(memoryView(base).view)
          const expected = new Map(base)
          batches.forEach((batch, index) => {
            pending.add(handed(batch as ReadonlyArray<Change>, changeSets[index]!), index + 1)
            for (const [changedKey, value] of batch) {
              if (value === undefined) expected.delete(changedKey)
              else expected.set(changedKey, value)
            }
          })
          const [start, end] = a <= b ? [a, b] : [b, a]
          const range = { start, end, reverse, ...(limit !== undefined ? { limit } : {}) }
          const keys = [...expected.keys()].filter((k) => k >= start && k < end).sort()
          if (reverse) keys.reverse()
          const want = (limit === undefined ? keys : keys.slice(0, limit)).map((k) => [k, expected.get(k)])
          const got = [...pending.getRange(range)].map((entry) => [entry.key, entry.value])
          assert.deepStrictEqual(got, want)
          assert.strictEqual(pending.count({ start, end }), keys.length)
        },
      ),
      { numRuns: 500 },
    )
  })

  it("after LMDB commits a prefix of the batches, reads still see every later pending change (batches given as lists or as an overlay's own index)", () => {
    fc.assert(
      fc.property(
        committedState,
        pendingBatches(5),
        asChangeSets,
        fc.nat({ max: 5 }),
        (committed, batches, changeSets, committedBatches) => {
          const base = new Map(Object.entries(committed))
          const pending = new PendingView(memoryView(base).view)
          const expected = new Map(base)
          const applyTo = (state: Map<string, unknown>, batch: ReadonlyArray<Change>) => {
            for (const [changedKey, value] of batch) {
              if (value === undefined) state.delete(changedKey)
              else state.set(changedKey, value)
            }
          }
          batches.forEach((batch, index) => {
            pending.add(handed(batch as ReadonlyArray<Change>, changeSets[index]!), index + 1)
            applyTo(expected, batch as ReadonlyArray<Change>)
          })
          // LMDB commits the first batches (the base now holds them), then the pending layer forgets them.
          const through = Math.min(committedBatches, batches.length)
          for (const batch of batches.slice(0, through)) applyTo(base, batch as ReadonlyArray<Change>)
          pending.evictThrough(through)
          for (const k of new Set([...Object.keys(committed), ...batches.flat().map(([k]) => k)])) {
            assert.deepStrictEqual(pending.get(k), expected.get(k), `key ${k}`)
          }
          const all = [...pending.getRange({ start: "", end: "f" })].map((entry) => [entry.key, entry.value])
          assert.deepStrictEqual(
            all,
            [...expected.keys()].sort().map((k) => [k, expected.get(k)]),
          )
          // Everything committed is gone from the pending layer; what is left is only later changes.
          const later = new Set(
            batches
              .slice(through)
              .flat()
              .map(([k]) => k),
          )
          assert.isAtMost(pending.size, later.size)
        },
      ),
      { numRuns: 500 },
    )
  })

  it("streams the committed side: a limited range reads a few committed entries, not the whole range", () => {
    const base = new Map(Array.from({ length: 10_000 }, (_, i) => [`m${String(i).padStart(5, "0")}`, i]))
    const committed = memoryView(base)
    const pending = new PendingView(committed.view)
    pending.add(
      [
        ["m00001", "changed"],
        ["m00002", undefined],
        ["m09999x", "new"],
      ],
      1,
    )
    const first = [...pending.getRange({ start: "m", end: "n", limit: 3 })]
    assert.deepStrictEqual(
      first.map((entry) => [entry.key, entry.value]),
      [
        ["m00000", 0],
        ["m00001", "changed"],
        ["m00003", 3],
      ],
    )
    assert.isAtMost(committed.pulled(), 5)
    const last = [...pending.getRange({ start: "m", end: "n", reverse: true, limit: 2 })]
    assert.deepStrictEqual(
      last.map((entry) => entry.key),
      ["m09999x", "m09999"],
    )
  })

  it("a batch enqueued at the WAL sequence of the commit in flight stays readable until its own commit", async () => {
    // A checkpoint deletes expired idempotency records under the last batch's sequence, possibly
    // while that batch's LMDB commit is on its way: that commit must not evict the deletion.
    const dir = mkdtempSync(join(tmpdir(), "mnemos-pending-"))
    const checkpoint = await Effect.runPromise(openCheckpoint(dir))
    try {
      await checkpoint.commit([["old", { reply: 1 }]], 1, 7)
      const commits: Array<Promise<void>> = []
      const watched: Checkpoint = {
        ...checkpoint,
        commit: (changes, appliedSeq, salt) => {
          const commit = checkpoint.commit(changes, appliedSeq, salt)
          commits.push(commit)
          return commit
        },
      }
      const view = new PendingView(checkpoint.view)
      const queue = new CommitQueue(watched, view, () => 7, { intervalMs: 60_000, changesMax: 1, bytesMax: 1 << 30 })
      queue.enqueue([["kv:a", "a"]], 2, 10) // its commit starts at once
      queue.enqueue([["old", undefined]], 2, 0) // waits behind that commit
      assert.strictEqual(commits.length, 1)
      assert.isUndefined(view.get("old"))
      await commits[0]
      // The first commit is done and its changes evicted; the deletion's own commit has only begun.
      assert.strictEqual(commits.length, 2)
      assert.isDefined(checkpoint.view.get("old"), "the deletion is not in LMDB yet")
      assert.isUndefined(view.get("old"))
      assert.strictEqual(view.get("kv:a"), "a")
      await queue.drain()
      assert.isUndefined(checkpoint.view.get("old"))
      assert.strictEqual(view.size, 0)
    } finally {
      await checkpoint.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
