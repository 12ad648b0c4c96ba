/**
 * `mnemos import` and `mnemos export`: move data in and out of a data directory.
 *
 * Formats: `conversations` (the default) — the conversations store's versioned JSONL backup
 * (docs/backup.md); `official-jsonl` — the official memory server's memory.jsonl (graph only).
 * `export --all` writes the full archive of every store (stores/Archive.ts), and `import`
 * recognises an archive by its first line and restores it into an empty data directory. Every
 * imported record passes the privacy filter first (privacy/PrivacyFilter.ts).
 * When the data directory's daemon answers, the conversations backup goes through it
 * (DaemonTransfer.ts): the daemon reads or writes its own stores, and this process never opens
 * them. Everything else (the archive, official-jsonl) needs the data directory to itself: stop the
 * daemon first. Without a daemon the command takes the directory's lock for its run (and refuses
 * a directory another process holds). Export writes atomically (temp file, fsync, rename); import
 * applies all or nothing.
 */
import { Console, Effect, Layer, Option, Result, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { Router } from "../actors/Router.ts"
import { type ImportOptions, importConversations } from "../conversations/ConversationImport.ts"
import { conversationStore } from "../conversations/ConversationStore.ts"
import {
  defaultImportLimits,
  type ExportSelection,
  exportConversations,
  type ImportPolicy,
  type TransferProgress,
} from "../conversations/ConversationTransfer.ts"
import { progressBar } from "../conversations/ProgressBar.ts"
import * as Engine from "../Engine.ts"
import { exportGraph, type GraphReader, importGraphFrom } from "../graph/GraphTransfer.ts"
import { defaultProjectName, type Entity, type Relation } from "../graph/Model.ts"
import { officialJsonlFileItems, serializeOfficialJsonl } from "../graph/OfficialJsonl.ts"
import { filteredStore, filterPrivate } from "../privacy/PrivacyFilter.ts"
import { resolveDataDir } from "../stores/datadir/DataDir.ts"
import { isArchiveFile } from "../transfer/Archive.ts"
import { exportArchiveFile, importArchiveFile } from "./ArchiveTransfer.ts"
import { writeFileAtomic } from "./AtomicFile.ts"
import {
  type DaemonEndpoint,
  type DaemonTransferFailed,
  exportThroughDaemon,
  importThroughDaemon,
  owningDaemon,
} from "./DaemonTransfer.ts"
import { dataDirFlag } from "./ServeCommand.ts"

const formatFlag = Flag.Literals("format", ["conversations", "official-jsonl"]).pipe(
  Flag.withDescription(
    "File format: conversations (default; the conversation messages' versioned JSONL backup) or official-jsonl (the official memory server's memory.jsonl)",
  ),
  Flag.withDefault("conversations" as const),
)
const projectFlag = Flag.String("project").pipe(
  Flag.withDescription(
    `official-jsonl: project to import into / export from (default: ${defaultProjectName}); conversations: only this project (export) or every record into it (import)`,
  ),
  Flag.optional,
)
const fileArgument = Argument.String("file").pipe(Argument.withDescription("The file to read or write"))
const policyFlag = Flag.Literals("policy", ["reject", "overwrite"]).pipe(
  Flag.withDescription(
    "conversations: when a message id is already stored, reject the import (default) or overwrite it",
  ),
  Flag.withDefault("reject" as const),
)
const outFlag = Flag.String("out").pipe(
  Flag.withDescription("The file to write (instead of the file argument)"),
  Flag.optional,
)
const sessionFlag = Flag.String("session").pipe(
  Flag.withDescription("conversations: export only this session"),
  Flag.optional,
)

const conversationStoreOf = Effect.gen(function* () {
  return (yield* Router).store(conversationStore)
})

/** The data directory's stores (no search: the daemon's next start brings it up to date). */
const withEngine = (dataDir: Option.Option<string>, command: string) =>
  Effect.provide(
    Layer.fresh(Engine.storesLayer({ dataDir: resolveDataDir(Option.getOrUndefined(dataDir)).path, command })),
  )

/**
 * memory.jsonl `file` as a graph reader: line by line, each item through the privacy filter; a
 * malformed line or an I/O error fails the read. The first read (the check) records the lines of
 * another type in `ignoredLines`; a failure in a later read means the file changed meanwhile.
 */
const officialJsonlReader = (file: string, ignoredLines: Array<number>): GraphReader<ImportFailed> => {
  let reads = 0
  return function* () {
    const first = reads++ === 0
    const failed = (message: string) =>
      Result.fail(
        new ImportFailed({
          message: `${message}${first ? " (nothing was imported)" : " (the file changed during the import: part of it was imported; import it again)"}`,
        }),
      )
    try {
      for (const decoded of officialJsonlFileItems(file)) {
        if (Result.isFailure(decoded)) {
          const error = decoded.failure
          yield failed(`${file}:${error.line}: ${error.message}`)
          return
        }
        const item = decoded.success
        if (item?._tag === "Ignored") {
          if (first) ignoredLines.push(item.line)
        } else if (item?._tag === "Entity")
          yield Result.succeed({ ...item, entity: filterPrivate(item.entity) as Entity })
        else if (item?._tag === "Relation")
          yield Result.succeed({ ...item, relation: filterPrivate(item.relation) as Relation })
      }
    } catch (error) {
      yield failed(`cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
}

/** `what` cannot go through the daemon: the user has to stop it. */
const needsDirectory = (daemon: DaemonEndpoint, what: string) =>
  new ImportFailed({
    message: `data directory ${daemon.dataDir} is in use by mnemos process ${daemon.pid} (the daemon on ${daemon.host}:${daemon.port}); ${what} needs the data directory to itself: stop the daemon first (only the conversations backup goes through it)`,
  })

const importInProcess = (
  file: string,
  options: ImportOptions,
  dataDir: Option.Option<string>,
  onProgress: TransferProgress,
) =>
  Effect.gen(function* () {
    const store = filteredStore(yield* conversationStoreOf)
    return yield* importConversations(store, file, options, defaultImportLimits, onProgress)
  }).pipe(
    Effect.mapError((error) => new ImportFailed({ message: `${file}: ${error.message} (nothing was imported)` })),
    withEngine(dataDir, "mnemos import"),
  )

/** The message of a failed import through the daemon: the in-process one, when the outcome is known. */
const daemonImportFailure = (file: string) => (error: DaemonTransferFailed) =>
  new ImportFailed({
    message: `${file}: ${error.message}${error.outcomeUnknown === true ? "" : " (nothing was imported)"}`,
  })

/** Imports a conversations backup: through the daemon when one owns the data directory, else in this process. */
const importConversationsFile = (
  file: string,
  policy: ImportPolicy,
  project: Option.Option<string>,
  dataDir: Option.Option<string>,
  daemon: DaemonEndpoint | undefined,
) =>
  Effect.gen(function* () {
    const bar = progressBar()
    const options = { policy, ...(Option.isSome(project) ? { project: project.value } : {}) }
    const report = yield* (
      daemon !== undefined
        ? importThroughDaemon(daemon, file, options, bar.update).pipe(Effect.mapError(daemonImportFailure(file)))
        : importInProcess(file, options, dataDir, bar.update)
    ).pipe(Effect.ensuring(Effect.sync(bar.done)))
    yield* Console.log(`imported ${report.records} conversation message(s) from ${file} (policy ${policy})`)
  })

export const importCommand = Command.make(
  "import",
  { file: fileArgument, format: formatFlag, policy: policyFlag, project: projectFlag, dataDir: dataDirFlag },
  Effect.fn(function* ({ file, format, policy, project: projectOption, dataDir }) {
    const daemon = yield* Effect.promise(() => owningDaemon(resolveDataDir(Option.getOrUndefined(dataDir)).path))
    if (isArchiveFile(file))
      return yield* daemon !== undefined
        ? needsDirectory(daemon, "restoring an archive")
        : importArchiveFile(file, dataDir)
    if (format === "conversations") return yield* importConversationsFile(file, policy, projectOption, dataDir, daemon)
    if (daemon !== undefined) return yield* needsDirectory(daemon, `importing --format ${format}`)
    const project = Option.getOrElse(projectOption, () => defaultProjectName)
    const ignoredLines: Array<number> = []
    const report = yield* importGraphFrom(officialJsonlReader(file, ignoredLines), project).pipe(
      Effect.mapError((error) =>
        error._tag === "ImportFailed"
          ? error
          : new ImportFailed({ message: `${file}: ${error.message} (nothing was imported)` }),
      ),
      withEngine(dataDir, "mnemos import"),
    )
    if (ignoredLines.length > 0)
      yield* Console.error(
        `skipped ${ignoredLines.length} line(s) of another type: ${ignoredLines.slice(0, 10).join(", ")}`,
      )
    yield* Console.log(
      `imported into project "${report.project}": ${report.entitiesCreated} entities (${report.entitiesSkipped} already present), ${report.relationsCreated} relations (${report.relationsSkipped} already present)`,
    )
  }),
).pipe(Command.withDescription("Import a file into the data directory (all or nothing: a bad line imports nothing)"))

const exportInProcess = (
  file: string,
  selection: ExportSelection,
  dataDir: Option.Option<string>,
  onProgress: TransferProgress,
) =>
  Effect.flatMap(conversationStoreOf, (store) =>
    exportConversations(store, file, selection, defaultImportLimits, onProgress),
  ).pipe(
    Effect.mapError((error) => new ImportFailed({ message: `${file}: ${error.message}` })),
    withEngine(dataDir, "mnemos export"),
  )

/** Exports the conversations backup: through the daemon when one owns the data directory, else in this process. */
const exportConversationsFile = (
  file: string,
  project: Option.Option<string>,
  session: Option.Option<string>,
  dataDir: Option.Option<string>,
  daemon: DaemonEndpoint | undefined,
) =>
  Effect.gen(function* () {
    const bar = progressBar()
    const selection = {
      ...(Option.isSome(project) ? { project: project.value } : {}),
      ...(Option.isSome(session) ? { session: session.value } : {}),
    }
    const report = yield* (
      daemon !== undefined
        ? exportThroughDaemon(daemon, file, selection, bar.update).pipe(
            Effect.mapError((error) => new ImportFailed({ message: `${file}: ${error.message}` })),
          )
        : exportInProcess(file, selection, dataDir, bar.update)
    ).pipe(Effect.ensuring(Effect.sync(bar.done)))
    yield* Console.log(`exported ${report.records} conversation message(s) to ${file}`)
  })

export const exportCommand = Command.make(
  "export",
  {
    file: fileArgument.pipe(Argument.optional),
    out: outFlag,
    format: formatFlag,
    project: projectFlag,
    session: sessionFlag,
    dataDir: dataDirFlag,
    all: Flag.Boolean("all").pipe(
      Flag.withDescription(
        "Export every store as a full mnemos archive (restored by mnemos import into an empty data directory)",
      ),
      Flag.withDefault(false),
    ),
  },
  Effect.fn(function* ({ file: fileOption, out, format, project: projectOption, session, dataDir, all }) {
    if (Option.isSome(fileOption) && Option.isSome(out))
      return yield* new ImportFailed({ message: "give the file either as an argument or with --out, not both" })
    const target = Option.orElse(out, () => fileOption)
    if (Option.isNone(target)) return yield* new ImportFailed({ message: "no file to write: give it with --out FILE" })
    const file = target.value
    const daemon = yield* Effect.promise(() => owningDaemon(resolveDataDir(Option.getOrUndefined(dataDir)).path))
    if (all)
      return yield* daemon !== undefined ? needsDirectory(daemon, "export --all") : exportArchiveFile(file, dataDir)
    if (format === "conversations") return yield* exportConversationsFile(file, projectOption, session, dataDir, daemon)
    if (daemon !== undefined) return yield* needsDirectory(daemon, `exporting --format ${format}`)
    const project = Option.getOrElse(projectOption, () => defaultProjectName)
    const graph = yield* exportGraph(project).pipe(withEngine(dataDir, "mnemos export"))
    yield* Effect.try({
      try: () => writeFileAtomic(file, [serializeOfficialJsonl(graph)]),
      catch: (error) =>
        new ImportFailed({
          message: `cannot write ${file}: ${error instanceof Error ? error.message : String(error)}`,
        }),
    })
    yield* Console.log(
      `exported project "${project}": ${graph.entities.length} entities, ${graph.relations.length} relations to ${file}`,
    )
  }),
).pipe(Command.withDescription("Export data to a file, written atomically"))

/** An import or export that could not be done; the message says why. */
export class ImportFailed extends Schema.TaggedError<ImportFailed>()("ImportFailed", { message: Schema.String }) {}
