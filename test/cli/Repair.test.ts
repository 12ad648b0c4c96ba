/**
 * `mnemos repair` on deliberately corrupted stores: a byte flipped in the middle of a stopped
 * store's log, with valid records after it, makes the store refuse to start; repair quarantines
 * the damage (every byte kept), reports what the store keeps and loses, and leaves a log that
 * opens. At the log level (no checkpoint: the records after the damage are lost, and counted) and
 * through the engine (the checkpoint already holds everything: nothing is lost).
 */
import { createHash } from "node:crypto"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, assert, describe, it } from "vitest"
import { healthCommand } from "../../src/cli/HealthCommand.ts"
import { repairCommand } from "../../src/cli/RepairCommand.ts"
import { openLocalWal } from "../../src/stores/wal/FileWal.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
import { encodeRecordInto, recordHeaderBytes } from "../../src/stores/wal/WalRecord.ts"
import { checkStoreLog, repairStoreLog } from "../../src/stores/wal/WalRepair.ts"
import {
  corruptGraphLog,
  flipByte,
  openTestEngine,
  recordsOf,
  removeTempDirs,
  runCommand,
  segmentsIn,
  tempDir,
} from "./support.ts"

afterAll(removeTempDirs)

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex")

/** A store directory `notes` whose log holds `batches` batches of `perBatch` records, no checkpoint. */
const storeWithLog = async (batches: number, perBatch: number) => {
  const storeDir = join(tempDir("mnemos-store-"), "notes")
  const walDir = join(storeDir, "wal")
  await Effect.runPromise(
    Effect.gen(function* () {
      const { wal } = yield* openLocalWal({ dir: walDir, segmentBytesMax: 1024 * 1024, replayAfterSeq: 0 })
      for (let batch = 0; batch < batches; batch++)
        yield* wal.appendBatch(
          Array.from({ length: perBatch }, (_, record) => ({
            type: 1,
            payload: JSON.stringify({ batch, record, text: "x".repeat(100) }),
          })),
        )
      yield* wal.close()
    }).pipe(Effect.provide(layerNode)),
  )
  return { storeDir, walDir }
}

describe("repairing a corrupt log", () => {
  it("without a checkpoint: keeps the records before the damage, reports the ones after as lost", async () => {
    const { storeDir, walDir } = await storeWithLog(10, 1)
    const [segment] = segmentsIn(walDir)
    const file = join(walDir, segment!)
    const victim = recordsOf(file)[4]! // sequence 5
    const original = sha256(file)
    flipByte(file, victim.offset + 40)

    const before = await Effect.runPromise(checkStoreLog("notes", storeDir))
    assert.strictEqual(before.state, "corrupt")
    assert.strictEqual(before.offset, victim.offset)

    const quarantineRoot = join(storeDir, "..", "quarantine")
    const report = await Effect.runPromise(
      repairStoreLog("notes", storeDir, quarantineRoot, new Date("2026-01-01T00:00:00Z")),
    )
    assert.deepStrictEqual(report.kept, { checkpointSeq: 0, logFirstSeq: 1, logLastSeq: 4 })
    assert.deepStrictEqual(report.lost, { records: 5, firstSeq: 6, lastSeq: 10 })
    assert.strictEqual(report.after.state, "ok")
    assert.strictEqual(report.after.lastSeq, 4)
    // Every byte kept: the damaged segment's original (flipped) bytes are in the quarantine.
    const kept = join(report.quarantine, segment!)
    assert.notStrictEqual(sha256(kept), original)
    flipByte(kept, victim.offset + 40)
    assert.strictEqual(sha256(kept), original, "the quarantined copy is the damaged file, byte for byte")
    assert.deepStrictEqual(JSON.parse(readFileSync(join(report.quarantine, "REPORT.json"), "utf8")).lost, report.lost)

    // The log opens and goes on from sequence 5.
    const next = await Effect.runPromise(
      Effect.gen(function* () {
        const { wal, replay } = yield* openLocalWal({ dir: walDir, segmentBytesMax: 1024 * 1024, replayAfterSeq: 0 })
        const appended = yield* wal.appendBatch([{ type: 1, payload: Buffer.from("{}") }])
        yield* wal.close()
        return { replayed: replay.map((record) => record.seq), appended }
      }).pipe(Effect.provide(layerNode)),
    )
    assert.deepStrictEqual(next.replayed, [1, 2, 3, 4])
    assert.deepStrictEqual(next.appended, { firstSeq: 5, lastSeq: 5, payloadBytes: 2 })
  })

  it("damage inside a batch: the batch's readable records before the damage are reported lost too", async () => {
    // Three batches of four records: sequences 1..4, 5..8, 9..12.
    const { storeDir, walDir } = await storeWithLog(3, 4)
    const [segment] = segmentsIn(walDir)
    const file = join(walDir, segment!)
    flipByte(file, recordsOf(file)[6]!.offset + 30) // sequence 7, the third record of the second batch
    const report = await Effect.runPromise(
      repairStoreLog("notes", storeDir, join(storeDir, "..", "quarantine"), new Date("2026-01-01T00:00:00Z")),
    )
    assert.deepStrictEqual(report.kept, { checkpointSeq: 0, logFirstSeq: 1, logLastSeq: 4 })
    // 5 and 6 were readable but go with their batch; 7 is the damaged one; 8..12 follow it.
    assert.deepStrictEqual(report.lost, { records: 7, firstSeq: 5, lastSeq: 12 })
  })

  it("damage in the first segment's header: every readable record it removes is reported lost", async () => {
    const { storeDir, walDir } = await storeWithLog(10, 1)
    const [segment] = segmentsIn(walDir)
    const file = join(walDir, segment!)
    // After the records, one of another store generation (as a reused file may hold): not counted.
    const bytes = readFileSync(file)
    const staleAt = recordsOf(file)[9]!.end
    const stale = Buffer.alloc(staleAt + recordHeaderBytes + 2)
    bytes.copy(stale, 0, 0, staleAt)
    encodeRecordInto(stale, staleAt, { seq: 11, salt: stale.readUInt32LE(8) + 1, type: 1, flags: 3, payload: "{}" })
    writeFileSync(file, stale)
    flipByte(file, 9) // inside the header's generation (salt): its checksum fails
    const report = await Effect.runPromise(
      repairStoreLog("notes", storeDir, join(storeDir, "..", "quarantine"), new Date("2026-01-01T00:00:00Z")),
    )
    assert.deepStrictEqual(report.kept, { checkpointSeq: 0 })
    assert.deepStrictEqual(report.lost, { records: 10, firstSeq: 1, lastSeq: 10 })
    assert.deepStrictEqual(segmentsIn(walDir), [])
  })

  it("a healthy log is left alone", async () => {
    const storeDir = join(tempDir("mnemos-store-"), "graph")
    await Effect.runPromise(
      Effect.gen(function* () {
        const { wal } = yield* openLocalWal({ dir: join(storeDir, "wal"), segmentBytesMax: 1024, replayAfterSeq: 0 })
        yield* wal.appendBatch([{ type: 1, payload: Buffer.from("{}") }])
        yield* wal.close()
      }).pipe(Effect.provide(layerNode)),
    )
    const outcome = await Effect.runPromise(Effect.flip(repairStoreLog("graph", storeDir, tempDir(), new Date())))
    assert.include(outcome, "is ok")
  })
})

describe("mnemos repair on an engine's data directory", () => {
  it("a corrupt graph log: the store refuses; repair quarantines it; the store opens with everything", async () => {
    const dir = tempDir("mnemos-data-")
    const { walDir, segments } = await corruptGraphLog(dir)

    const sick = await runCommand(healthCommand, ["--data-dir", dir])
    assert.isFalse(sick.ok)
    assert.match(sick.stdout, /graph\s+corrupt/)
    assert.include(sick.error?.message ?? "", 'store "graph" is corrupt')

    // A mistyped directory is an error, not a healthy store (and is not created).
    const mistyped = await runCommand(repairCommand, ["--data-dir", `${dir}-typo`, "--dry-run"])
    assert.isFalse(mistyped.ok)
    assert.include(mistyped.error?.message ?? "", `no data directory at ${dir}-typo`)
    assert.isFalse(existsSync(`${dir}-typo`))

    const dry = await runCommand(repairCommand, ["--data-dir", dir, "--dry-run"])
    assert.isTrue(dry.ok, dry.stderr)
    assert.include(dry.stdout, 'store "graph" is corrupt')
    assert.deepStrictEqual(segmentsIn(walDir), segments, "--dry-run changes nothing")

    const run = await runCommand(repairCommand, ["--data-dir", dir])
    assert.isTrue(run.ok, `${run.stderr} ${run.error?.message}`)
    assert.include(run.stdout, 'store "graph" repaired')
    assert.include(run.stdout, "lost: nothing") // everything was already in the checkpoint
    assert.match(run.stdout, /quarantined: .*wal-/)
    assert.include(run.stdout, 'store "conversations": log opens')

    const healthy = await runCommand(healthCommand, ["--data-dir", dir])
    assert.isTrue(healthy.ok, `${healthy.stdout} ${healthy.error?.message}`)
    const reopened = await openTestEngine(dir)
    try {
      const graph = JSON.parse((await reopened.ok("read_graph", {})).text)
      assert.strictEqual(graph.entities.length, 8)
      await reopened.ok("create_entities", { entities: [{ name: "after repair", entityType: "t", observations: [] }] })
    } finally {
      await reopened.close()
    }
  })

  it("refuses while another process owns the data directory", async () => {
    const dir = tempDir("mnemos-data-")
    const engine = await openTestEngine(dir)
    try {
      const run = await runCommand(repairCommand, ["--data-dir", dir])
      assert.isFalse(run.ok)
      assert.include(run.error?.message ?? "", "repair needs the data directory to itself")
    } finally {
      await engine.close()
    }
  })
})
