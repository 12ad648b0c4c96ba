/**
 * `<dataDir>/config.json`: the settings that belong to a data directory rather than to one
 * command line. Optional; a missing file means every default.
 *
 * ```json
 * {
 *   "privacy": {
 *     "disable": ["jwt"],
 *     "patterns": [{ "name": "acme-ticket", "regex": "ACME-[0-9]{6}", "flags": "i" }]
 *   }
 * }
 * ```
 *
 * `privacy.disable` switches built-in secret kinds off; `privacy.patterns` adds kinds of your own
 * (the whole match is redacted as `[REDACTED:<name>]`). `nats` joins a shared memory as the
 * `serve --nats*` flags do (`{"servers": ["nats://a:4222"], "prefix": "team", "replicas": 3,
 * "creds": "/path/user.creds"}`; docs/scaling.md); a flag or `MNEMOS_NATS*` variable wins over it. The file is decoded strictly — an unknown
 * key, an unknown kind or a pattern that does not compile is an error naming the file — because a
 * typo that silently dropped a pattern would store the very secrets it was written for.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Result, Schema } from "effect"
import { builtinKinds, compileCustomPattern, type PrivacySettings } from "../../privacy/PrivacyFilter.ts"

/** The file's name inside the data directory. */
export const dataDirConfigFileName = "config.json"
/** At most this many custom patterns. */
export const customPatternsMax = 64
/** At most this many characters per custom pattern. */
export const customPatternCharsMax = 1024
/** The config file is read whole; larger is refused. */
export const configFileBytesMax = 1024 * 1024

const KindName = Schema.String.pipe(
  Schema.check(Schema.isPattern(/^[a-z0-9][a-z0-9-]{0,39}$/, { message: "a kind name is 1-40 of a-z, 0-9, -" })),
)

const PatternEntry = Schema.Struct({
  name: KindName,
  regex: Schema.String.pipe(
    Schema.check(
      Schema.isMinLength(1),
      Schema.isMaxLength(customPatternCharsMax, {
        message: `a pattern is at most ${customPatternCharsMax} characters`,
      }),
    ),
  ),
  flags: Schema.optional(Schema.String),
})

const PrivacySection = Schema.Struct({
  disable: Schema.optional(Schema.Array(Schema.String)),
  patterns: Schema.optional(
    Schema.Array(PatternEntry).pipe(
      Schema.check(Schema.isMaxLength(customPatternsMax, { message: `at most ${customPatternsMax} patterns` })),
    ),
  ),
})

const NatsSection = Schema.Struct({
  servers: Schema.Array(Schema.String),
  prefix: Schema.optional(Schema.String),
  replicas: Schema.optional(Schema.Int),
  creds: Schema.optional(Schema.String),
  leaseMs: Schema.optional(Schema.Int),
})

/** The file's shape. */
export const DataDirConfigFile = Schema.Struct({
  privacy: Schema.optional(PrivacySection),
  nats: Schema.optional(NatsSection),
})
export type DataDirConfigFile = typeof DataDirConfigFile.Type

/** The data directory's configuration, resolved. */
export interface DataDirConfig {
  readonly path: string
  /** Whether the file exists (every value is a default when it does not). */
  readonly present: boolean
  readonly file: DataDirConfigFile
  readonly privacy: PrivacySettings
}

const decodeFile = Schema.decodeUnknownResult(DataDirConfigFile)

/** Decodes and checks the text of a config file; the error names what is wrong. */
export const parseDataDirConfig = (path: string, text: string): Result.Result<DataDirConfig, string> => {
  let json: unknown
  try {
    json = JSON.parse(text.startsWith("\uFEFF") ? text.slice(1) : text)
  } catch (error) {
    return Result.fail(`${path} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`)
  }
  const decoded = decodeFile(json, { onExcessProperty: "error" })
  if (Result.isFailure(decoded)) return Result.fail(`${path}: ${decoded.failure.message}`)
  const file = decoded.success
  const unknownKinds = (file.privacy?.disable ?? []).filter((kind) => !builtinKinds.includes(kind))
  if (unknownKinds.length > 0)
    return Result.fail(
      `${path}: privacy.disable names unknown kind(s) ${unknownKinds.join(", ")}; the built-in kinds are ${builtinKinds.join(", ")}`,
    )
  const customPatterns = (file.privacy?.patterns ?? []).map((entry) => ({
    name: entry.name,
    regex: entry.regex,
    ...(entry.flags !== undefined ? { flags: entry.flags } : {}),
  }))
  for (const pattern of customPatterns) {
    try {
      compileCustomPattern(pattern)
    } catch (error) {
      return Result.fail(`${path}: privacy.patterns: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  return Result.succeed({
    path,
    present: true,
    file,
    privacy: { disabledKinds: file.privacy?.disable ?? [], customPatterns },
  })
}

/** Reads `<dir>/config.json`; a missing file is every default. */
export const readDataDirConfig = (dir: string): Result.Result<DataDirConfig, string> => {
  const path = join(dir, dataDirConfigFileName)
  let text: string
  try {
    const bytes = readFileSync(path)
    if (bytes.length > configFileBytesMax) return Result.fail(`${path} is larger than ${configFileBytesMax} bytes`)
    text = bytes.toString("utf8")
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      return Result.succeed({ path, present: false, file: {}, privacy: { disabledKinds: [], customPatterns: [] } })
    return Result.fail(`cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`)
  }
  return parseDataDirConfig(path, text)
}
