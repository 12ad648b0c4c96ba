/**
 * The commit queue encodes the changes that wait for their LMDB commit ahead of the commit's own
 * turn (CommitQueue.ts). Whatever the interleaving of batches, encoding turns, commits and commits
 * refused by a full disk (whose changes go back in front of the queue), every commit carries each
 * change with its own value's encoding, and the commits together carry every change once, in order.
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
    close: () => Promise.resolve(),
  }) satisfies Checkpoint

const value = fc.oneof(
  fc.constant(undefined),
  fc.string(),
  fc.record({ name: fc.string(), observations: fc.array(fc.string(), { maxLength: 3 }) }),
)
const step = fc.oneof(
  fc.record({ kind: fc.constant("enqueue" as const), values: fc.array(value, { minLength: 1, maxLength: 6 }) }),
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

  it("gives every commit each change's own encoding, and every change to exactly one commit, in order", async () => {
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
            const changes = next.values.map((value, index): Change => [`k${seq}-${index}`, value])
            enqueued.push(...changes)
            queue.enqueue(changes, ++seq, 10)
          } else if (next.kind === "turn") await vi.advanceTimersByTimeAsync(60)
          else await settleNext(next.refused)
        }
        // Then every commit succeeds (a refused one is retried after `diskFullRetryMs`).
        const drained = queue.drain()
        for (let rounds = 0; rounds < 1000 && committed.length < enqueued.length; rounds++) {
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
        assert.deepStrictEqual(committed, enqueued)
      }),
      { numRuns: 200 },
    )
  })
})
