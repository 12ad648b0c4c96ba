/**
 * `mnemos repair`: the explicit way out of a corrupt store log.
 *
 * A store whose log has a bad record with valid records after it refuses to start and keeps every
 * byte (stores/Wal.ts). This command, run while nothing owns the data directory (it takes the
 * lock), checks every store's log and, for each corrupt one, moves the damage into
 * `<dataDir>/quarantine/<store>/<time>/` (stores/WalRepair.ts) and reports which sequences the
 * store keeps and which records it loses. `--dry-run` only checks and says what it would do.
 * Exit code 0 when every store opens afterwards, 1 otherwise.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { Console, Effect, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import { lockDataDir, resolveDataDir } from "../stores/datadir/DataDir.ts"
import { checkStoreLog, type RepairReport, repairStoreLog, storeDirs } from "../stores/wal/WalRepair.ts"
import { dataDirFlag } from "./ServeCommand.ts"

/** The directory, under the data directory, where damaged segments are kept. */
export const quarantineDirName = "quarantine"

/** Some store could not be repaired; the message says which and why. */
export class RepairFailed extends Schema.TaggedError<RepairFailed>()("RepairFailed", { message: Schema.String }) {}

const describeReport = (report: RepairReport): ReadonlyArray<string> => {
  const keptLog =
    report.kept.logFirstSeq !== undefined && report.kept.logLastSeq !== undefined
      ? `, and log records ${report.kept.logFirstSeq}..${report.kept.logLastSeq}`
      : ""
  return [
    `✓ store "${report.store}" repaired: damage in ${report.damage.file} at byte ${report.damage.offset}`,
    `    kept: everything up to sequence ${report.kept.checkpointSeq} (checkpoint)${keptLog}`,
    report.lost.records === 0
      ? "    lost: nothing"
      : `    lost: ${report.lost.records} readable record(s) from the damaged batch on, sequences ${report.lost.firstSeq}..${report.lost.lastSeq}`,
    `    quarantined: ${report.quarantinedFiles.join(", ")} in ${report.quarantine} (REPORT.json beside them)`,
  ]
}

export const repairCommand = Command.make(
  "repair",
  {
    dataDir: dataDirFlag,
    dryRun: Flag.Boolean("dry-run").pipe(
      Flag.withDescription("Check and report only; change nothing"),
      Flag.withDefault(false),
    ),
  },
  Effect.fn(function* ({ dataDir, dryRun }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    // Taking the lock would create the directory: a mistyped path must not look like a healthy store.
    if (!existsSync(location.path))
      return yield* new RepairFailed({ message: `no data directory at ${location.path}: nothing to repair` })
    yield* lockDataDir(location.path, "mnemos repair").pipe(
      Effect.mapError(
        (error) =>
          new RepairFailed({
            message:
              error.reason === "Locked"
                ? `${error.message} (repair needs the data directory to itself)`
                : error.message,
          }),
      ),
    )
    const failures: Array<string> = []
    let repaired = 0
    for (const { store, dir } of storeDirs(location.path)) {
      const check = yield* checkStoreLog(store, dir)
      if (check.state === "ok") {
        yield* Console.log(`✓ store "${store}": log opens (up to sequence ${check.lastSeq ?? check.appliedSeq})`)
        continue
      }
      if (check.state === "torn-tail") {
        yield* Console.log(`✓ store "${store}": ${check.message}`)
        continue
      }
      if (check.state === "unreadable") {
        failures.push(`store "${store}": ${check.message}`)
        yield* Console.error(
          `✗ store "${store}": ${check.message} (mnemos repair only quarantines corrupt log segments)`,
        )
        continue
      }
      if (dryRun) {
        yield* Console.log(
          `! store "${store}" is corrupt: ${check.message}\n    would quarantine ${check.file} (cut back to the last complete batch before byte ${check.offset}) and every later segment`,
        )
        continue
      }
      const outcome = yield* Effect.result(
        repairStoreLog(store, dir, join(location.path, quarantineDirName), new Date()),
      )
      if (outcome._tag === "Failure") {
        failures.push(outcome.failure)
        yield* Console.error(`✗ ${outcome.failure}`)
      } else {
        repaired++
        for (const line of describeReport(outcome.success)) yield* Console.log(line)
      }
    }
    if (failures.length > 0) return yield* new RepairFailed({ message: `${failures.length} store(s) not repaired` })
    if (!dryRun && repaired > 0) yield* Console.log(`${repaired} store(s) repaired; they open on the next start.`)
  }, Effect.scoped),
).pipe(Command.withDescription("Quarantine the damaged part of corrupt store logs, with a report of what was kept"))
