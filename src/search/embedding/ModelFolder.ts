/**
 * The data directory's `models/` folder: sentence models pulled from a hub (`mnemos model pull`),
 * which one `serve` embeds with (`model use`), and their removal.
 *
 * Layout: `models/<name>/` holds `model.onnx`, `tokenizer.json` (what `serve --model DIR` reads)
 * and `pulled.json` (where the files came from and their SHA-256). A pull works in
 * `models/.pull-<name>/` (partial files `*.part` stay there between runs, to be resumed) and renames
 * it to `models/<name>/` only when every file is verified, so `serve` never sees a half model.
 * `models/chosen.json` names the model `serve` uses (written atomically); without it, the built-in
 * model.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { writeFileAtomic } from "../../cli/AtomicFile.ts"
import { fileUrl, type ModelCatalogue, type PinnedFile } from "./ModelCatalogue.ts"
import { type DownloadProgress, downloadPinnedFile, ModelError, sha256Of } from "./ModelDownload.ts"

/** The models folder of a data directory. */
export const modelsDirOf = (dataDir: string): string => join(dataDir, "models")
/** The name `model use` takes for the built-in model. */
export const builtinModelName = "builtin"

const chosenFile = (dataDir: string) => join(modelsDirOf(dataDir), "chosen.json")
const stagingDir = (dataDir: string, name: string) => join(modelsDirOf(dataDir), `.pull-${name}`)
/** Where a pulled model lives. */
export const modelDirOf = (dataDir: string, name: string): string => join(modelsDirOf(dataDir), name)

/** What `pulled.json` records. */
interface PulledRecord {
  readonly name: string
  readonly repo: string
  readonly revision: string
  readonly files: ReadonlyArray<PinnedFile>
}

const readPulled = (dir: string): PulledRecord | undefined => {
  try {
    return JSON.parse(readFileSync(join(dir, "pulled.json"), "utf8")) as PulledRecord
  } catch {
    return undefined
  }
}

const ioError = (error: unknown) =>
  error instanceof ModelError
    ? error
    : new ModelError({ reason: "Io", message: error instanceof Error ? error.message : String(error) })

/** A model name is a plain directory name. */
const checkName = (name: string) =>
  /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(name)
    ? Effect.void
    : Effect.fail(new ModelError({ reason: "Unknown", message: `"${name}" is not a model name` }))

/** How to get the model without a network (the failure message of an offline pull). */
export const manualLayout = (catalogue: ModelCatalogue, name: string, hub: string): string => {
  const model = catalogue[name]!
  const files = model.files.map((file) => `  ${fileUrl(hub, model, file)} → DIR/${file.as}`).join("\n")
  return `Without network: on a machine that has it, fetch\n${files}\nand start mnemos with \`mnemos serve --model DIR\` (or set MNEMOS_MODEL=DIR).`
}

/** Pulls `name` of `catalogue` from `hub` into the models folder; answers its directory. */
export const pullModel = (options: {
  readonly dataDir: string
  readonly name: string
  readonly hub: string
  readonly catalogue: ModelCatalogue
  readonly progress: DownloadProgress
}): Effect.Effect<{ readonly dir: string; readonly alreadyPulled: boolean }, ModelError> =>
  Effect.gen(function* () {
    const { dataDir, name, hub, catalogue } = options
    yield* checkName(name)
    const model = catalogue[name]
    if (model === undefined)
      return yield* new ModelError({
        reason: "Unknown",
        message: `no pinned model "${name}"; known: ${Object.keys(catalogue).join(", ")}`,
      })
    const dir = modelDirOf(dataDir, name)
    if (readPulled(dir)?.revision === model.revision) return { dir, alreadyPulled: true }
    const staging = stagingDir(dataDir, name)
    yield* Effect.tryPromise({
      try: async () => {
        mkdirSync(staging, { recursive: true, mode: 0o700 })
        for (const file of model.files) {
          const target = join(staging, file.as)
          if (existsSync(target) && (await sha256Of(target)) === file.sha256) continue
          await downloadPinnedFile(fileUrl(hub, model, file), target, file, options.progress)
        }
        writeFileAtomic(join(staging, "pulled.json"), [
          JSON.stringify({ name, repo: model.repo, revision: model.revision, files: model.files }, null, 2),
        ])
        rmSync(dir, { recursive: true, force: true })
        renameSync(staging, dir)
      },
      catch: (error) => {
        const problem = ioError(error)
        if (problem.reason !== "Offline") return problem
        return new ModelError({
          reason: "Offline",
          message: `${problem.message} (set --hub URL or HF_ENDPOINT for a mirror). ${manualLayout(catalogue, name, hub)}`,
        })
      },
    })
    return { dir, alreadyPulled: false }
  })

/** The model `serve` uses, by name; undefined for the built-in one. */
export const chosenModel = (dataDir: string): string | undefined => {
  try {
    const { name } = JSON.parse(readFileSync(chosenFile(dataDir), "utf8")) as { name?: unknown }
    return typeof name === "string" ? name : undefined
  } catch {
    return undefined
  }
}

/** Checks a pulled model's files against what `pulled.json` recorded. */
const verifyPulled = (dir: string, name: string) =>
  Effect.gen(function* () {
    const record = readPulled(dir)
    if (record === undefined)
      return yield* new ModelError({
        reason: "NotPulled",
        message: `${name} is not pulled (no ${join(dir, "pulled.json")}); run \`mnemos model pull ${name}\``,
      })
    for (const file of record.files) {
      const path = join(dir, file.as)
      const sha256 = existsSync(path) ? yield* Effect.promise(() => sha256Of(path)) : "missing"
      if (sha256 !== file.sha256)
        return yield* new ModelError({
          reason: "Mismatch",
          message: `${path} is ${sha256 === "missing" ? "missing" : "not the file that was pulled"}; run \`mnemos model remove ${name}\` and pull it again`,
        })
    }
  })

/** Makes `name` (a pulled model, or `builtin`) the model `serve` embeds with. */
export const useModel = (dataDir: string, name: string): Effect.Effect<void, ModelError> =>
  Effect.gen(function* () {
    if (name !== builtinModelName) {
      yield* checkName(name)
      yield* verifyPulled(modelDirOf(dataDir, name), name)
    }
    yield* Effect.try({
      try: () => {
        mkdirSync(modelsDirOf(dataDir), { recursive: true, mode: 0o700 })
        if (name === builtinModelName) rmSync(chosenFile(dataDir), { force: true })
        else writeFileAtomic(chosenFile(dataDir), [JSON.stringify({ name })])
      },
      catch: ioError,
    })
  })

/** Removes a pulled model (and any partial pull of it); the model in use is refused. */
export const removeModel = (dataDir: string, name: string): Effect.Effect<void, ModelError> =>
  Effect.gen(function* () {
    yield* checkName(name)
    if (chosenModel(dataDir) === name)
      return yield* new ModelError({
        reason: "InUse",
        message: `${name} is the model serve uses; first \`mnemos model use builtin\` (or another model)`,
      })
    const dir = modelDirOf(dataDir, name)
    const staging = stagingDir(dataDir, name)
    if (!existsSync(dir) && !existsSync(staging))
      return yield* new ModelError({ reason: "NotPulled", message: `no model ${name} in ${modelsDirOf(dataDir)}` })
    yield* Effect.try({
      try: () => {
        rmSync(dir, { recursive: true, force: true })
        rmSync(staging, { recursive: true, force: true })
      },
      catch: ioError,
    })
  })

/** A model of the catalogue or of the folder, as `model list` shows it. */
export interface ListedModel {
  readonly name: string
  readonly state: "pulled" | "partial" | "not pulled"
  readonly inUse: boolean
  readonly bytes: number
  readonly repo?: string
}

const bytesIn = (dir: string) =>
  existsSync(dir) ? readdirSync(dir).reduce((sum, entry) => sum + statSync(join(dir, entry)).size, 0) : 0

/** The catalogue's models and every model pulled into the folder, with their state. */
export const listModels = (dataDir: string, catalogue: ModelCatalogue): ReadonlyArray<ListedModel> => {
  const folder = modelsDirOf(dataDir)
  const pulled = existsSync(folder)
    ? readdirSync(folder).filter((entry) => readPulled(join(folder, entry)) !== undefined)
    : []
  const chosen = chosenModel(dataDir)
  const names = [...new Set([...Object.keys(catalogue), ...pulled])]
  return names.map((name) => {
    const dir = modelDirOf(dataDir, name)
    const record = readPulled(dir)
    const state = record !== undefined ? "pulled" : existsSync(stagingDir(dataDir, name)) ? "partial" : "not pulled"
    const repo = record?.repo ?? catalogue[name]?.repo
    return {
      name,
      state,
      inUse: chosen === name,
      bytes: state === "partial" ? bytesIn(stagingDir(dataDir, name)) : bytesIn(dir),
      ...(repo !== undefined ? { repo } : {}),
    }
  })
}

/** Every pulled model's directory, by name (for benchmarks: each is measured beside the built-in one). */
export const pulledModelDirs = (dataDir: string): ReadonlyArray<{ readonly name: string; readonly dir: string }> =>
  listModels(dataDir, {})
    .filter((model) => model.state === "pulled")
    .map((model) => ({ name: model.name, dir: modelDirOf(dataDir, model.name) }))
