/**
 * `mnemos model pull|use|remove|list` below the CLI: the real download code against a loopback hub
 * (hubServer.ts) serving a small generated ONNX model in the hub's URL layout.
 *
 * - A pull fetches every pinned file (following the hub's redirect), verifies it, and only then
 *   makes the model directory, which `serve --model` accepts; pulling again fetches nothing.
 * - A transfer cut mid-file is resumed with a Range request in the same run; a run that gives up
 *   leaves its partial file outside the model directory, and the next run continues from it.
 * - Bytes that do not hash to the pin are refused and deleted; no model directory appears.
 * - Without network the pull fails at once, saying how to lay out a model by hand.
 * - `use` records the choice (verifying the files), `remove` refuses the model in use.
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { encoderConfigOf } from "../../src/search/embedding/EncoderLoader.ts"
import type { ModelError } from "../../src/search/embedding/ModelDownload.ts"
import {
  chosenModel,
  listModels,
  modelDirOf,
  modelsDirOf,
  pullModel,
  removeModel,
  useModel,
} from "../../src/search/embedding/ModelFolder.ts"
import { removeTempDirs, tempDir } from "../editor/harness.ts"
import { closedPort, startHub, tinyModel } from "./hubServer.ts"

afterAll(removeTempDirs)

const { catalogue, files } = tinyModel()
const modelPath = [...files.keys()][0]!

const withHub = <A, E>(use: (hub: Awaited<ReturnType<typeof startHub>>) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.promise(() => startHub(files)),
    use,
    (hub) => Effect.promise(() => hub.close()),
  )

const pull = (dataDir: string, hub: string) =>
  pullModel({ dataDir, name: "tiny", hub, catalogue, progress: () => undefined })

const failure = (effect: Effect.Effect<unknown, ModelError>) => Effect.flip(effect)

describe("model pull", () => {
  it.live("downloads and verifies every file, then the model directory appears; a second pull fetches nothing", () =>
    withHub((hub) =>
      Effect.gen(function* () {
        const dataDir = tempDir("mnemos-pull-")
        const pulled = yield* pull(dataDir, hub.url)
        assert.isFalse(pulled.alreadyPulled)
        assert.strictEqual(pulled.dir, modelDirOf(dataDir, "tiny"))
        assert.deepStrictEqual(readFileSync(join(pulled.dir, "model.onnx")), files.get(modelPath))
        assert.deepStrictEqual(encoderConfigOf(pulled.dir), { kind: "transformer", dir: pulled.dir })
        assert.deepStrictEqual(readdirSync(modelsDirOf(dataDir)), ["tiny"])
        assert.isTrue(
          hub.requests.some((request) => request.path.startsWith("/cdn/")),
          "the redirect was followed",
        )
        const requests = hub.requests.length
        const again = yield* pull(dataDir, hub.url)
        assert.isTrue(again.alreadyPulled)
        assert.strictEqual(hub.requests.length, requests)
        assert.deepInclude(listModels(dataDir, catalogue)[0]!, { name: "tiny", state: "pulled", inUse: false })
      }),
    ),
  )

  it.live("a transfer cut mid-file resumes with a Range request in the same run", () =>
    withHub((hub) =>
      Effect.gen(function* () {
        const dataDir = tempDir("mnemos-pull-")
        hub.cuts.set(modelPath, { afterBytes: 100, times: 2 })
        const seen: Array<number> = []
        const pulled = yield* pullModel({
          dataDir,
          name: "tiny",
          hub: hub.url,
          catalogue,
          progress: (file, received) => file === "model.onnx" && seen.push(received),
        })
        assert.deepStrictEqual(readFileSync(join(pulled.dir, "model.onnx")), files.get(modelPath))
        const ranges = hub.requests.filter((request) => request.path.startsWith("/cdn/")).map((r) => r.range)
        assert.deepStrictEqual(ranges, [undefined, "bytes=100-", "bytes=200-"])
        assert.strictEqual(seen.at(-1), files.get(modelPath)!.length)
      }),
    ),
  )

  it.live("a server that ignores the range sends the whole file again, which replaces the partial one", () =>
    withHub((hub) =>
      Effect.gen(function* () {
        const dataDir = tempDir("mnemos-pull-")
        hub.cuts.set(modelPath, { afterBytes: 100, times: 1 })
        hub.ranges.ignored = true
        const pulled = yield* pull(dataDir, hub.url)
        assert.deepStrictEqual(readFileSync(join(pulled.dir, "model.onnx")), files.get(modelPath))
        const ranges = hub.requests.filter((request) => request.path.startsWith("/cdn/")).map((r) => r.range)
        assert.deepStrictEqual(ranges, [undefined, "bytes=100-"])
      }),
    ),
  )

  it.live("a run that gives up leaves its partial file outside the model directory; the next run continues it", () =>
    withHub((hub) =>
      Effect.gen(function* () {
        const dataDir = tempDir("mnemos-pull-")
        hub.cuts.set(modelPath, { afterBytes: 50, times: 4 }) // 4 requests of 50 bytes each: the run gives up
        const error = yield* failure(pull(dataDir, hub.url))
        assert.strictEqual(error.reason, "Interrupted")
        assert.isFalse(existsSync(modelDirOf(dataDir, "tiny")), "no half model where serve would load it")
        assert.deepInclude(listModels(dataDir, catalogue)[0]!, { state: "partial", bytes: 200 })
        hub.cuts.clear()
        const before = hub.requests.length
        const pulled = yield* pull(dataDir, hub.url)
        assert.deepStrictEqual(readFileSync(join(pulled.dir, "model.onnx")), files.get(modelPath))
        const resumed = hub.requests.slice(before).find((request) => request.path.startsWith("/cdn/"))
        assert.strictEqual(resumed?.range, "bytes=200-")
      }),
    ),
  )

  it.live("bytes that do not hash to the pin are refused and deleted", () =>
    withHub((hub) =>
      Effect.gen(function* () {
        const dataDir = tempDir("mnemos-pull-")
        const tokenizerPath = [...files.keys()][1]!
        const tampered = Buffer.from(files.get(tokenizerPath)!)
        tampered[10] = tampered[10]! ^ 1
        hub.files.set(tokenizerPath, tampered)
        const error = yield* failure(pull(dataDir, hub.url))
        assert.strictEqual(error.reason, "Mismatch")
        assert.include(error.message, "tokenizer.json has SHA-256")
        assert.include(error.message, "refused and deleted")
        assert.isFalse(existsSync(modelDirOf(dataDir, "tiny")))
        const staging = join(modelsDirOf(dataDir), ".pull-tiny")
        assert.deepStrictEqual(readdirSync(staging), ["model.onnx"], "only the verified file is kept")

        hub.files.set(tokenizerPath, Buffer.concat([files.get(tokenizerPath)!, Buffer.from(" ")]))
        const longer = yield* failure(pull(dataDir, hub.url))
        assert.include(longer.message, "larger than its pinned")
        const used = yield* failure(useModel(dataDir, "tiny"))
        assert.strictEqual(used.reason, "NotPulled")
      }),
    ),
  )

  it.live("without network the pull fails at once, saying how to lay out a model by hand", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(closedPort)
      const error = yield* failure(pull(tempDir("mnemos-pull-"), `http://127.0.0.1:${port}`))
      assert.strictEqual(error.reason, "Offline")
      assert.include(error.message, "ECONNREFUSED")
      assert.include(error.message, "HF_ENDPOINT")
      assert.include(
        error.message,
        `http://127.0.0.1:${port}/test-org/tiny-bert/resolve/0123456789abcdef/onnx/model.onnx → DIR/model.onnx`,
      )
      assert.include(error.message, "mnemos serve --model DIR")
      const unknown = yield* failure(
        pullModel({ dataDir: tempDir("m-"), name: "nope", hub: "", catalogue, progress: () => undefined }),
      )
      assert.strictEqual(unknown.message, 'no pinned model "nope"; known: tiny')
    }),
  )
})

describe("model use and remove", () => {
  it.live("use records a verified model; remove refuses the model in use; a changed file is refused by use", () =>
    withHub((hub) =>
      Effect.gen(function* () {
        const dataDir = tempDir("mnemos-use-")
        const notYet = yield* failure(useModel(dataDir, "tiny"))
        assert.include(notYet.message, "run `mnemos model pull tiny`")
        const { dir } = yield* pull(dataDir, hub.url)
        yield* useModel(dataDir, "tiny")
        assert.strictEqual(chosenModel(dataDir), "tiny")
        assert.isTrue(listModels(dataDir, catalogue)[0]!.inUse)
        const inUse = yield* failure(removeModel(dataDir, "tiny"))
        assert.strictEqual(inUse.reason, "InUse")
        yield* useModel(dataDir, "builtin")
        assert.isUndefined(chosenModel(dataDir))

        writeFileSync(join(dir, "tokenizer.json"), "{}")
        const changed = yield* failure(useModel(dataDir, "tiny"))
        assert.strictEqual(changed.reason, "Mismatch")
        yield* removeModel(dataDir, "tiny")
        assert.isFalse(existsSync(dir))
        const gone = yield* failure(removeModel(dataDir, "tiny"))
        assert.strictEqual(gone.reason, "NotPulled")
        const badName = yield* failure(useModel(dataDir, "../elsewhere"))
        assert.include(badName.message, "is not a model name")
        rmSync(modelsDirOf(dataDir), { recursive: true })
      }),
    ),
  )
})
