/**
 * `mnemos import` and `mnemos export`: move data in and out of a data directory.
 *
 * Formats: `official-jsonl` — the official memory server's memory.jsonl (graph only). The data
 * directory must not be owned by another process (stop the daemon first); the command takes the
 * lock for its run. Export writes atomically (temp file, fsync, rename).
 */
import { readFileSync } from "node:fs"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as Engine from "../Engine.ts"
import { exportGraph, importGraph } from "../graph/GraphTransfer.ts"
import { defaultProjectName } from "../graph/Model.ts"
import { parseOfficialJsonl, serializeOfficialJsonl } from "../graph/OfficialJsonl.ts"
import { resolveDataDir } from "../stores/DataDir.ts"
import { writeFileAtomic } from "./AtomicFile.ts"
import { dataDirFlag } from "./ServeCommand.ts"

const formatFlag = Flag.Literals("format", ["official-jsonl"]).pipe(
  Flag.withDescription("File format: official-jsonl (the official memory server's memory.jsonl)"),
)
const projectFlag = Flag.String("project").pipe(
  Flag.withDescription(`Project to import into / export from (default: ${defaultProjectName})`),
  Flag.withDefault(defaultProjectName),
)
const fileArgument = Argument.String("file").pipe(Argument.withDescription("The file to read or write"))

const withEngine = (dataDir: Option.Option<string>, command: string) =>
  Effect.provide(Layer.fresh(Engine.layer({ dataDir: resolveDataDir(Option.getOrUndefined(dataDir)).path, command })))

export const importCommand = Command.make(
  "import",
  { file: fileArgument, format: formatFlag, project: projectFlag, dataDir: dataDirFlag },
  Effect.fn(function* ({ file, project, dataDir }) {
    const text = yield* Effect.try({
      try: () => readFileSync(file, "utf8"),
      catch: (error) =>
        new ImportFailed({ message: `cannot read ${file}: ${error instanceof Error ? error.message : String(error)}` }),
    })
    const parsed = yield* parseOfficialJsonl(text).pipe(
      Effect.mapError(
        (error) =>
          new ImportFailed({
            message: `${file}:${error.line}: ${error.message} (nothing was imported)\n  ${error.excerpt}`,
          }),
      ),
    )
    const report = yield* importGraph(parsed.graph, project).pipe(
      Effect.mapError((error) => new ImportFailed({ message: `${file}: ${error.message} (nothing was imported)` })),
      withEngine(dataDir, "mnemos import"),
    )
    if (parsed.ignoredLines.length > 0)
      yield* Console.error(
        `skipped ${parsed.ignoredLines.length} line(s) of another type: ${parsed.ignoredLines.slice(0, 10).join(", ")}`,
      )
    yield* Console.log(
      `imported into project "${report.project}": ${report.entitiesCreated} entities (${report.entitiesSkipped} already present), ${report.relationsCreated} relations (${report.relationsSkipped} already present)`,
    )
  }),
).pipe(Command.withDescription("Import a file into the data directory (all or nothing: a bad line imports nothing)"))

export const exportCommand = Command.make(
  "export",
  { file: fileArgument, format: formatFlag, project: projectFlag, dataDir: dataDirFlag },
  Effect.fn(function* ({ file, project, dataDir }) {
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
