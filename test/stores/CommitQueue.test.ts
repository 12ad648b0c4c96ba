/**
 * The commit queue encodes the changes that wait for their LMDB commit ahead of the commit's own
 * turn (CommitQueue.ts). Whatever the interleaving of batches, encoding turns, commits and commits
 * refused by a full disk (whose changes go back in front of the queue), every commit carries each
 * change with its own value's encoding and each key once, and the commits applied in order leave
 * what the changes applied in order leave (a key's last value).
 */
import * as fc from "fast-check"
import { afterEach, assert, beforeEach, describe, it, vi } from "vitest"
import { type Change, type Checkpoint, DiskFullError, encodedValue } from "../../src/stores/checkpoint/Checkpoint.ts"
import { CommitQueue } from "../../src/stores/checkpoint/CommitQueue.ts"
import { PendingView } from "../../src/stores/checkpoint/PendingView.ts"

interface Commit {
  readonly changes: ReadonlyArray<Change>
  readonly encoded: ReadonlyArray<Buffer | undefined> | undefined
  readonly settle: (refused: boolean) => void
}

/** A checkpoint whose commits wait until the test settles them; reads find nothing. */
const heldCheckpoint = (commits: Array<Commit>): Checkpoint =>
  ({
    path: "/nowhere",
    appliedSeq: () => 0,
    salt: () => undefined,
    position: () => undefined,
    view: { get: () => undefined, getRange: () => [], count: () => 0 },
    commit: (changes, _seq, _salt, _position, encoded) =>
      new Promise<void>((resolve, reject) =>
        commits.push({
          changes,
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
    // Keys from a small set, so that batches and commits repeat them (as a project's counters are).
    changes: fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), value), { minLength: 1, maxLength: 6 }),
  }),
  fc.record({ kind: fc.constant("turn" as const) }),
  fc.record({ kind: fc.constant("settle" as const), refused: fc.boolean() }),
)

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
        const queue = new CommitQueue(
          heldCheckpoint(commits),
          new PendingView({ get: () => undefined, getRange: () => [], count: () => 0 }),
          () => 1,
          {
            intervalMs: 50,
            changesMax,
            bytesMax: 1 << 30,
          },
        )
        const enqueued: Array<Change> = []
        const committed: Array<Change> = []
        let seq = 0
        let settled = 0
        const settleNext = async (refused: boolean) => {
          const commit = commits[settled]
          if (commit === undefined) return
          settled++
          if (!refused) committed.push(...commit.changes)
          commit.settle(refused)
          await vi.advanceTimersByTimeAsync(0)
        }
        for (const next of steps) {
          if (next.kind === "enqueue") {
            const changes = next.changes.map(([key, value]): Change => [`k${key}`, value])
            enqueued.push(...changes)
            queue.enqueue(changes, ++seq, 10)
          } else if (next.kind === "turn") await vi.advanceTimersByTimeAsync(60)
          else await settleNext(next.refused)
        }
        // Then every commit succeeds (a refused one is retried after `diskFullRetryMs`).
        let drainedYet = false
        const drained = queue.drain().then(() => {
          drainedYet = true
        })
        for (let rounds = 0; rounds < 1000 && (settled < commits.length || !drainedYet); rounds++) {
          await vi.advanceTimersByTimeAsync(1_000)
          while (settled < commits.length) await settleNext(false)
        }
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
        const applied = (changes: ReadonlyArray<Change>) => {
          const state = new Map<string, unknown>()
          for (const [key, value] of changes) value === undefined ? state.delete(key) : state.set(key, value)
          return [...state].sort(([a], [b]) => (a < b ? -1 : 1))
        }
        assert.deepStrictEqual(applied(committed), applied(enqueued))
      }),
      { numRuns: 200 },
    )
  })
})
