/**
 * The commit queue encodes the changes that wait for their LMDB commit ahead of the commit's own
 * turn (CommitQueue.ts). Whatever the interleaving of batches, encoding turns, commits, commits
 * refused by a full disk (whose changes go back in front of the queue) and disks with room for a
 * few changes at a time, every commit carries each change with its own value's encoding and each key
 * once, what the commits applied in order leave at each commit is what the batches through the
 * sequence it records leave, and once the disk has room for a batch everything reaches LMDB.
 */
import * as fc from "fast-check"
import { afterEach, assert, beforeEach, describe, it, vi } from "vitest"
import { type Change, type Checkpoint, DiskFullError, encodedValue } from "../../src/stores/checkpoint/Checkpoint.ts"
import { CommitQueue } from "../../src/stores/checkpoint/CommitQueue.ts"
import { PendingView } from "../../src/stores/checkpoint/PendingView.ts"

interface Commit {
  readonly changes: ReadonlyArray<Change>
  readonly seq: number
  readonly encoded: ReadonlyArray<Buffer | undefined> | undefined
  readonly settle: (refused: boolean) => void
}

/**
 * A checkpoint whose commits wait until the test settles them; reads find nothing. A commit of more
 * changes than `room.changes` is refused at once, as LmdbRoom.ts's check refuses one the disk has no
 * room for.
 */
const heldCheckpoint = (commits: Array<Commit>, room: { changes: number }): Checkpoint =>
  ({
    path: "/nowhere",
    appliedSeq: () => 0,
    salt: () => undefined,
    position: () => undefined,
    view: { get: () => undefined, getRange: () => [], count: () => 0 },
    commit: (changes, seq, _salt, _position, encoded) =>
      changes.length > room.changes
        ? Promise.reject(new DiskFullError({ path: "/nowhere", message: "no room for this transaction" }))
        : new Promise<void>((resolve, reject) =>
            commits.push({
              changes,
              seq,
              encoded,
              settle: (refused) =>
                refused ? reject(new DiskFullError({ path: "/nowhere", message: "no space left" })) : resolve(),
            }),
          ),
    commitWith: () => {},
    flushed: () => Promise.resolve(),
    sizeBytes: () => 0,
    entriesTouched: () => 0,
    releaseMappedPages: () => Promise.resolve(),
    close: () => Promise.resolve(),
  }) satisfies Checkpoint

const value = fc.oneof(
  fc.constant(undefined),
  fc.string(),
  fc.record({ name: fc.string(), observations: fc.array(fc.string(), { maxLength: 3 }) }),
)
const step = fc.oneof(
  fc.record({
    kind: fc.constant("enqueue" as const),
    // Keys from a small set, so that batches and commits repeat them (as a project's counters are),
    // but more than a disk with room for a batch lets one commit carry.
    changes: fc.array(fc.tuple(fc.integer({ min: 0, max: 15 }), value), { minLength: 1, maxLength: 6 }),
  }),
  fc.record({ kind: fc.constant("turn" as const) }),
  fc.record({ kind: fc.constant("settle" as const), refused: fc.boolean() }),
  // The disk's room, in changes a commit may carry (a batch carries at most 6).
  fc.record({ kind: fc.constant("room" as const), changes: fc.integer({ min: 6, max: 12 }) }),
)

/** What `changes` applied in order leave: each key's last value, by key. */
const applied = (changes: ReadonlyArray<Change>) => {
  const state = new Map<string, unknown>()
  for (const [key, value] of changes) value === undefined ? state.delete(key) : state.set(key, value)
  return [...state].sort(([a], [b]) => (a < b ? -1 : 1))
}

describe("the commit queue's encoding ahead of the commit", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate", "clearImmediate"] })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it("gives every commit each change's own encoding and each key once, and leaves every key's last value", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 40 }), fc.integer({ min: 1, max: 8 }), async (steps, changesMax) => {
        const commits: Array<Commit> = []
        const room = { changes: Number.POSITIVE_INFINITY }
        const queue = new CommitQueue(
          heldCheckpoint(commits, room),
          new PendingView({ get: () => undefined, getRange: () => [], count: () => 0 }),
          () => 1,
          {
            intervalMs: 50,
            changesMax,
            bytesMax: 1 << 30,
          },
        )
        const enqueued: Array<Change> = []
        /** The changes of the batches enqueued so far, by sequence (batch `seq` is `batches[seq - 1]`). */
        const batches: Array<ReadonlyArray<Change>> = []
        const committed: Array<Change> = []
        let lastCommittedSeq = 0
        let settled = 0
        const settleNext = async (refused: boolean) => {
          const commit = commits[settled]
          if (commit === undefined) return
          settled++
          if (!refused) {
            committed.push(...commit.changes)
            assert.isAtLeast(commit.seq, lastCommittedSeq, "a commit records an earlier sequence than one before it")
            lastCommittedSeq = commit.seq
            assert.deepStrictEqual(
              applied(committed),
              applied(batches.slice(0, commit.seq).flat()),
              `LMDB at the sequence ${commit.seq} its commit records`,
            )
          }
          commit.settle(refused)
          await vi.advanceTimersByTimeAsync(0)
        }
        for (const next of steps) {
          if (next.kind === "enqueue") {
            const changes = next.changes.map(([key, value]): Change => [`k${key}`, value])
            enqueued.push(...changes)
            batches.push(changes)
            queue.enqueue(changes, batches.length, 10)
          } else if (next.kind === "turn") await vi.advanceTimersByTimeAsync(60)
          else if (next.kind === "room") room.changes = next.changes
          else await settleNext(next.refused)
        }
        // Then every commit the room lets through succeeds (a refused one is retried after
        // `diskFullRetryMs`); the disk keeps whatever room it last had, enough for any one batch.
        let drainedYet = false
        const drained = queue.drain().then(() => {
          drainedYet = true
        })
        for (let rounds = 0; rounds < 100 && (settled < commits.length || !drainedYet); rounds++) {
          await vi.advanceTimersByTimeAsync(1_000)
          while (settled < commits.length) await settleNext(false)
        }
        await vi.advanceTimersByTimeAsync(0)
        assert.isTrue(drainedYet && queue.diskFull === undefined, "changes wait for LMDB though each batch fits")
        await drained
        for (const commit of commits) {
          assert.isDefined(commit.encoded)
          assert.strictEqual(commit.encoded.length, commit.changes.length)
          commit.changes.forEach(([key, value], index) => {
            assert.deepStrictEqual(commit.encoded![index], encodedValue(value), `the encoding of ${key}`)
          })
        }
        for (const commit of commits) {
          const keys = commit.changes.map(([key]) => key)
          assert.strictEqual(new Set(keys).size, keys.length, `a commit writes a key twice: ${keys}`)
        }
        assert.deepStrictEqual(applied(committed), applied(enqueued))
        assert.strictEqual(lastCommittedSeq, batches.length, "the last commit records the last batch's sequence")
      }),
      { numRuns: 200 },
    )
  })
})
