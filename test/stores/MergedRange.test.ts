/**
 * Changes not yet in LMDB are merged into its ranges in LMDB's own key order (KeyCodec bytes, i.e.
 * code points), not JavaScript's UTF-16 order: otherwise a paged range read skips or repeats keys
 * around U+E000–U+FFFF versus astral characters, and a limited read answers differently before
 * and after the LMDB commit.
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
  type KeyRange,
  openCheckpoint,
  type StoreView,
} from "../../src/stores/checkpoint/Checkpoint.ts"
import { CommitQueue } from "../../src/stores/checkpoint/CommitQueue.ts"
import { compareKeys, encodeKey } from "../../src/stores/checkpoint/KeyCodec.ts"
import { PendingView } from "../../src/stores/checkpoint/PendingView.ts"

/** Code units where UTF-16 and code point order part: ASCII, U+E000–U+FFFF, astral pairs, lone surrogates. */
const keyUnit = fc.oneof(
  fc.integer({ min: 0x00, max: 0x7f }).map((unit) => String.fromCharCode(unit)),
  fc.constantFrom("\ud7ff", "\ue000", "\uff01", "\ufffd", "\uffff"),
  fc.integer({ min: 0xe000, max: 0xffff }).map((unit) => String.fromCharCode(unit)),
  fc.constantFrom("\u{10000}", "\u{1f600}", "\u{1f601}", "\u{10ffff}"),
  fc.integer({ min: 0x10000, max: 0x10ffff }).map((point) => String.fromCodePoint(point)),
  // Lone halves; two in a row may happen to form a pair, which is wanted too.
  fc.constantFrom("\ud800", "\ud83d", "\udbff", "\udc00", "\ude00", "\udfff"),
)
const keyPart = fc.string({ unit: keyUnit, maxLength: 6 })
/** Two keys, often sharing a prefix, so the comparison is decided deep inside them. */
const keyPair = fc.oneof(
  fc.tuple(keyPart, keyPart),
  fc.tuple(keyPart, keyPart, keyPart).map(([prefix, a, b]) => [prefix + a, prefix + b] as const),
)

const byBytes = (a: string, b: string) => Math.sign(Buffer.compare(encodeKey(a), encodeKey(b)))

describe("compareKeys", () => {
  it("orders any two keys as their KeyCodec bytes order in LMDB", () => {
    fc.assert(
      fc.property(keyPair, ([a, b]) => {
        assert.strictEqual(Math.sign(compareKeys(a, b)), byBytes(a, b), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`)
      }),
      { numRuns: 20_000 },
    )
  })

  it("decides the cases where a shared high surrogate pairs in one key only", () => {
    const cases = [
      ["k\ud83d\ude00", "k\ud83d\uffff"],
      ["k\ud83d\ude00", "k\ud83dA"],
      ["k\ud83d", "k\ud83d\ude00"],
      ["k\ud83d\ude00", "k\ue000"],
      ["k\udc00", "k\ue000"],
      ["k\ud7ff", "k\ud800"],
    ] as const
    for (const [a, b] of cases) assert.strictEqual(Math.sign(compareKeys(a, b)), byBytes(a, b), JSON.stringify([a, b]))
  })
})

/** Runs `body` with a real LMDB checkpoint in a temporary directory, closed and removed after. */
const withCheckpoint = async (body: (checkpoint: Checkpoint) => Promise<void>) => {
  const dir = mkdtempSync(join(tmpdir(), "mnemos-merged-range-"))
  const checkpoint = await Effect.runPromise(openCheckpoint(dir))
  try {
    await body(checkpoint)
  } finally {
    await checkpoint.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

const prefix = "s\u0000"
const all: KeyRange = { start: prefix, end: "s\u0001" }

/**
 * Every key of `range`, read one at a time, each page starting after the last key (or, reversed,
 * ending before it). Stops after `pagesMax` pages: a misordered merge can page in a cycle.
 */
const pagedKeys = (view: StoreView, range: KeyRange, pagesMax = 100): Array<string> => {
  const keys: Array<string> = []
  let page = range
  while (keys.length < pagesMax) {
    const [entry] = [...view.getRange({ ...page, limit: 1 })]
    if (entry === undefined) break
    keys.push(entry.key)
    page = range.reverse ? { ...page, end: entry.key } : { ...page, start: `${entry.key}\u0000` }
  }
  return keys
}

describe("mergedRange over LMDB", () => {
  it("pages through pending and committed keys in the order LMDB has them after the commit", () =>
    withCheckpoint(async (checkpoint) => {
      const committed: Array<Change> = [
        "a",
        "\uff01fullwidth",
        "\u{1f600}emoji",
        "\ue000",
        "\u{10000}",
        "x\ud83d",
        "\ufffd\u{1f600}",
      ].map((key) => [`${prefix}${key}`, `committed ${key}`])
      await checkpoint.commit(committed, 1, 7)
      const pending: Array<Change> = [
        ...["\u{1f601}", "\uffff", "\ue001x", "a\uff01", "a\u{1f600}", "x\ud83d\ude00", "\ufffd\uffff"].map(
          (key): Change => [`${prefix}${key}`, `pending ${key}`],
        ),
        [`${prefix}\uff01fullwidth`, "replaced"],
        [`${prefix}\u{10000}`, undefined],
      ]
      const view = new PendingView(checkpoint.view)
      const queue = new CommitQueue(checkpoint, view, () => 7, {
        intervalMs: 60_000,
        changesMax: 1_000,
        bytesMax: 1 << 30,
      })
      queue.enqueue(pending, 2, 100)
      const ranges: Array<KeyRange> = [
        all,
        { ...all, reverse: true },
        // Bounds that JavaScript's order and LMDB's place differently around the pending keys.
        { start: `${prefix}\uf000`, end: `${prefix}\u{1f601}` },
        { start: `${prefix}\uf000`, end: `${prefix}\u{1f601}`, reverse: true },
        { start: `${prefix}\u{10000}`, end: `${prefix}\uffff` },
      ]
      const beforeCommit = ranges.map((range) => ({
        paged: pagedKeys(view, range),
        whole: [...view.getRange(range)].map((entry) => [entry.key, entry.value]),
      }))
      assert.isAbove(view.size, 0, "the changes are still pending")
      await queue.drain()
      assert.strictEqual(view.size, 0, "the changes are all in LMDB now")
      ranges.forEach((range, index) => {
        const afterCommit = [...checkpoint.view.getRange(range)].map((entry) => [entry.key, entry.value])
        assert.deepStrictEqual(
          beforeCommit[index]!.paged,
          afterCommit.map(([key]) => key),
          `paged range ${JSON.stringify(range)}`,
        )
        assert.deepStrictEqual(beforeCommit[index]!.whole, afterCommit, `whole range ${JSON.stringify(range)}`)
      })
      // Not a vacuous match: the full range holds every live key.
      assert.strictEqual(beforeCommit[0]!.paged.length, committed.length + pending.length - 3)
    }))

  it("a reverse range of LMDB alone holds its start key exactly when the start sorts below the end in LMDB's order", () =>
    withCheckpoint(async (checkpoint) => {
      const [fullwidth, emoji] = [`${prefix}\uff01`, `${prefix}\u{1f600}`]
      await checkpoint.commit(
        [
          [fullwidth, 1],
          [emoji, 2],
        ],
        1,
        7,
      )
      const keysOf = (range: KeyRange) => [...checkpoint.view.getRange(range)].map((entry) => entry.key)
      // U+FF01 sorts below U+1F600 in LMDB (JavaScript's `<` says the opposite).
      assert.deepStrictEqual(keysOf({ start: fullwidth, end: emoji, reverse: true }), [fullwidth])
      assert.deepStrictEqual(keysOf({ start: emoji, end: fullwidth, reverse: true }), [])
    }))

  it("a count honours the range's limit, with or without pending changes", () =>
    withCheckpoint(async (checkpoint) => {
      await checkpoint.commit(
        ["a", "b", "c", "d", "e"].map((key): Change => [`${prefix}${key}`, key]),
        1,
        7,
      )
      const limited = { ...all, limit: 2 }
      assert.strictEqual(checkpoint.view.count(limited), 2)
      assert.strictEqual(checkpoint.view.count(all), 5)
      const view = new PendingView(checkpoint.view)
      assert.strictEqual(view.count(limited), 2)
      view.add([[`${prefix}f`, "f"]], 1)
      assert.strictEqual(view.count(limited), 2)
      assert.strictEqual(view.count(all), 6)
    }))
})
