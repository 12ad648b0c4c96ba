/**
 * `mnemos model pull|list|use|remove`: sentence models in the data directory's models folder
 * (search/ModelFolder.ts). `pull` downloads a pinned model from the Hugging Face hub (`--hub URL`
 * or `$HF_ENDPOINT` for a mirror), with a progress bar on a terminal and one line per file
 * otherwise; `use` makes `serve` embed with it (restart serve to switch).
 */
import { Console, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { builtinCatalogue, defaultHubUrl, defaultModelName } from "../search/embedding/ModelCatalogue.ts"
import type { DownloadProgress } from "../search/embedding/ModelDownload.ts"
import {
  builtinModelName,
  listModels,
  modelsDirOf,
  pullModel,
  removeModel,
  useModel,
} from "../search/embedding/ModelFolder.ts"
import { resolveDataDir } from "../stores/datadir/DataDir.ts"
import { dataDirFlag } from "./ServeCommand.ts"

/** Least time between two redraws of the bar. */
const redrawIntervalMs = 100
const barWidth = 30

const megabytes = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`

/** A bar redrawn in place on a terminal; on a pipe, a line when each file starts. */
const downloadProgress = (stream: NodeJS.WriteStream = process.stderr) => {
  let current = ""
  let lastDrawMs = 0
  const update: DownloadProgress = (file, received, total) => {
    if (file !== current) {
      if (current !== "" && stream.isTTY) stream.write("\n")
      current = file
      if (!stream.isTTY) stream.write(`downloading ${file} (${megabytes(total)})\n`)
    }
    if (!stream.isTTY) return
    const now = Date.now()
    if (now - lastDrawMs < redrawIntervalMs && received < total) return
    lastDrawMs = now
    const filled = Math.round((received / total) * barWidth)
    stream.write(
      `\r${file.padEnd(16)} [${"#".repeat(filled)}${"-".repeat(barWidth - filled)}] ${((received / total) * 100).toFixed(0).padStart(3)}% ${megabytes(received)} of ${megabytes(total)}`,
    )
  }
  return { update, done: () => (current !== "" && stream.isTTY ? stream.write("\n") : undefined) }
}

const nameArgument = Argument.String("name").pipe(
  Argument.withDescription("The model's name (see `mnemos model list`)"),
)

const dataDirOf = (flag: Option.Option<string>) => resolveDataDir(Option.getOrUndefined(flag)).path

const pullCommand = Command.make(
  "pull",
  {
    dataDir: dataDirFlag,
    name: Argument.String("name").pipe(
      Argument.withDescription(`The model to download (default ${defaultModelName})`),
      Argument.optional,
    ),
    hub: Flag.String("hub").pipe(
      Flag.withDescription(`The hub or mirror to download from (default $HF_ENDPOINT, else ${defaultHubUrl})`),
      Flag.optional,
    ),
  },
  Effect.fn(function* ({ dataDir, name, hub }) {
    const dir = dataDirOf(dataDir)
    const model = Option.getOrElse(name, () => defaultModelName)
    const hubUrl = Option.getOrUndefined(hub) ?? (process.env.HF_ENDPOINT || defaultHubUrl)
    const progress = downloadProgress()
    const pulled = yield* pullModel({
      dataDir: dir,
      name: model,
      hub: hubUrl,
      catalogue: builtinCatalogue,
      progress: progress.update,
    }).pipe(Effect.ensuring(Effect.sync(progress.done)))
    yield* Console.log(
      pulled.alreadyPulled ? `${model} is already in ${pulled.dir}` : `${model} pulled and verified: ${pulled.dir}`,
    )
    yield* Console.log(`to embed with it: mnemos model use ${model} (then restart serve)`)
  }),
).pipe(
  Command.withDescription("Download a sentence model (verified against pinned SHA-256 sums) into the models folder"),
)

const listCommand = Command.make(
  "list",
  { dataDir: dataDirFlag },
  Effect.fn(function* ({ dataDir }) {
    const dir = dataDirOf(dataDir)
    const models = listModels(dir, builtinCatalogue)
    const anyInUse = models.some((model) => model.inUse)
    yield* Console.log(`${anyInUse ? " " : "*"} ${builtinModelName.padEnd(24)} built in (GloVe/WordNet)`)
    for (const model of models)
      yield* Console.log(
        `${model.inUse ? "*" : " "} ${model.name.padEnd(24)} ${model.state.padEnd(10)} ${model.bytes > 0 ? megabytes(model.bytes).padStart(9) : "".padStart(9)}  ${model.repo ?? ""}`,
      )
    yield* Console.log(`models folder: ${modelsDirOf(dir)} (* = the model serve uses)`)
  }),
).pipe(Command.withDescription("List the pinned and pulled models, and which one serve uses"))

const useCommand = Command.make(
  "use",
  { dataDir: dataDirFlag, name: nameArgument },
  Effect.fn(function* ({ dataDir, name }) {
    yield* useModel(dataDirOf(dataDir), name)
    yield* Console.log(
      `serve will embed with ${name === builtinModelName ? "the built-in model" : name}; restart it to switch (records are re-embedded in the background; the current model answers until they all are)`,
    )
  }),
).pipe(Command.withDescription(`Make serve embed with a pulled model (or ${builtinModelName})`))

const removeCommand = Command.make(
  "remove",
  { dataDir: dataDirFlag, name: nameArgument },
  Effect.fn(function* ({ dataDir, name }) {
    yield* removeModel(dataDirOf(dataDir), name)
    yield* Console.log(`removed ${name}`)
  }),
).pipe(Command.withDescription("Delete a pulled model (or a partial pull) from the models folder"))

export const modelCommand = Command.make("model").pipe(
  Command.withDescription("Sentence models for search: pull, list, use, remove"),
  Command.withSubcommands([pullCommand, listCommand, useCommand, removeCommand]),
)
