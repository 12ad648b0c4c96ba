/**
 * The command-line side of the full archive (stores/Archive.ts): `mnemos export --all FILE` and
 * `mnemos import FILE` when FILE is an archive. A progress bar on a terminal, one plain line per
 * store otherwise. Both take the data directory's lock (stop the daemon first).
 */
import { Console, Effect, Layer, Option } from "effect"
import { progressBar } from "../conversations/ProgressBar.ts"
import { domainStates, domainStores } from "../Engine.ts"
import { lockDataDir, resolveDataDir } from "../stores/datadir/DataDir.ts"
import { type ArchiveReport, exportArchive, importArchive } from "../transfer/Archive.ts"
import { localStores } from "./HealthCommand.ts"

const summary = (verb: string, file: string, report: ArchiveReport) =>
  Effect.gen(function* () {
    for (const [store, count] of Object.entries(report.entries))
      yield* Console.log(`${verb} ${store}: ${count} entries`)
    const total = Object.values(report.entries).reduce((sum, count) => sum + count, 0)
    yield* Console.log(
      `${verb} ${total} entries of ${Object.keys(report.entries).length} store(s) ${verb === "exported" ? "to" : "from"} ${file}`,
    )
  })

/** `mnemos export --all FILE`. */
export const exportArchiveFile = (file: string, dataDir: Option.Option<string>) =>
  Effect.gen(function* () {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const bar = progressBar()
    const report = yield* exportArchive(file, domainStores, bar.update).pipe(
      Effect.ensuring(Effect.sync(bar.done)),
      Effect.provide(Layer.fresh(localStores(location.path, "mnemos export --all"))),
    )
    yield* summary("exported", file, report)
  })

/** `mnemos import FILE` of an archive: into an empty data directory only. */
export const importArchiveFile = (file: string, dataDir: Option.Option<string>) =>
  Effect.gen(function* () {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const bar = progressBar()
    const report = yield* Effect.scoped(
      Effect.gen(function* () {
        yield* lockDataDir(location.path, "mnemos import")
        return yield* importArchive(file, location.path, domainStores, domainStates, bar.update)
      }),
    ).pipe(Effect.ensuring(Effect.sync(bar.done)))
    yield* summary("imported", file, report)
  })
