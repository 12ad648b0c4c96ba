/**
 * The privacy filter: what every string goes through before any store sees it.
 *
 * `<private>…</private>` spans are dropped (tags in any case, with attributes too —
 * `<private reason="...">`; nested spans included; an unclosed `<private>` drops the rest of the
 * string), then secrets are replaced by `[REDACTED:<kind>]` (SecretPatterns.ts
 * plus the patterns of the data directory's config.json). `filterPrivate` applies this to every
 * string of a JSON-like value — tool arguments before they are decoded (McpSession.ts), imported
 * records (`filteredStore`: the imports of the CLI and of the daemon) — and to object keys too, so a
 * secret cannot hide in a key.
 *
 * Owns process-wide state: the active configuration (set once by the owner of the data directory
 * when it takes the lock, see stores/DataDir.ts) and the counters `mnemos health` reports. The
 * filter is idempotent (`filter(filter(x)) = filter(x)`: markers are never redacted again) and
 * never throws: values nested deeper than `nestingDepthMax` are replaced by a marker, which the
 * tool's schema then refuses.
 */
import type { Store } from "../actors/StoreActor.ts"
import { builtinSecretPatterns, redactionMarker, type SecretPattern } from "./SecretPatterns.ts"

/** Deeper values are replaced whole (no tool argument is anywhere near this deep). */
export const nestingDepthMax = 128

/** A user pattern from config.json (`privacy.patterns`). */
export interface CustomPattern {
  readonly name: string
  readonly regex: string
  readonly flags?: string
}

/** What the filter applies besides `<private>` spans. */
export interface PrivacySettings {
  /** Built-in kinds switched off (false positives a user has decided to accept). */
  readonly disabledKinds: ReadonlyArray<string>
  readonly customPatterns: ReadonlyArray<CustomPattern>
}

/** What the filter has done since the process started (or `resetPrivacyStats`). */
export interface PrivacyStats {
  readonly stringsScanned: number
  readonly stringsChanged: number
  readonly privateSpansDropped: number
  readonly secretsRedacted: number
  readonly redactedByKind: Readonly<Record<string, number>>
}

/** The names of the built-in kinds. */
export const builtinKinds: ReadonlyArray<string> = [...new Set(builtinSecretPatterns.map((pattern) => pattern.kind))]

/** Compiles a user pattern; throws a message naming the pattern when it is unusable. */
export const compileCustomPattern = (pattern: CustomPattern): SecretPattern => {
  const flags = pattern.flags ?? ""
  if (!/^[imsu]*$/.test(flags)) throw new Error(`pattern "${pattern.name}": flags may only use i, m, s, u`)
  let regex: RegExp
  try {
    regex = new RegExp(pattern.regex, `g${flags}`)
  } catch (error) {
    throw new Error(`pattern "${pattern.name}": ${error instanceof Error ? error.message : String(error)}`)
  }
  if (regex.test("")) throw new Error(`pattern "${pattern.name}" matches the empty string`)
  regex.lastIndex = 0
  return { kind: pattern.name, description: `custom pattern /${pattern.regex}/${flags}`, regex }
}

const defaultSettings: PrivacySettings = { disabledKinds: [], customPatterns: [] }

let activePatterns: ReadonlyArray<SecretPattern> = builtinSecretPatterns
let activeSettings: PrivacySettings = defaultSettings

/** Makes `settings` the filter's configuration for this process; throws on an unusable pattern. */
export const configurePrivacy = (settings: PrivacySettings): void => {
  const custom = settings.customPatterns.map(compileCustomPattern)
  const disabled = new Set(settings.disabledKinds)
  activePatterns = [...builtinSecretPatterns.filter((pattern) => !disabled.has(pattern.kind)), ...custom]
  activeSettings = settings
}

/** The configuration in force. */
export const privacySettings = (): PrivacySettings => activeSettings

let stringsScanned = 0
let stringsChanged = 0
let privateSpansDropped = 0
const redactedByKind = new Map<string, number>()

/** The counters, for health. */
export const privacyStats = (): PrivacyStats => {
  const byKind = Object.fromEntries([...redactedByKind.entries()].sort(([a], [b]) => (a < b ? -1 : 1)))
  return {
    stringsScanned,
    stringsChanged,
    privateSpansDropped,
    secretsRedacted: [...redactedByKind.values()].reduce((sum, count) => sum + count, 0),
    redactedByKind: byKind,
  }
}

/** Zeroes the counters (tests). */
export const resetPrivacyStats = (): void => {
  stringsScanned = 0
  stringsChanged = 0
  privateSpansDropped = 0
  redactedByKind.clear()
}

/**
 * The start of a `<private>` tag, opening or closing: `<private` or `</private` followed by
 * whitespace or `>`, so `<private reason="...">` is one and `<privateer>` is not. The tag runs to
 * the next `>` (attribute values are not parsed: any `>` ends it, and what follows is inside the
 * span anyway); a tag with no `>` after it runs to the end of the text, so a cut-off opening tag
 * hides the rest instead of leaking it.
 */
const tagStart = /<(\/?)private(?=[\s>])/gi
const openTagStart = /<private(?=[\s>])/i

/** Drops `<private>` spans; returns the text and how many outermost spans were dropped. */
export const dropPrivateSpans = (text: string): { readonly text: string; readonly spans: number } => {
  if (!openTagStart.test(text)) return { text, spans: 0 }
  tagStart.lastIndex = 0
  let out = ""
  let depth = 0
  let from = 0
  let spans = 0
  for (let match = tagStart.exec(text); match !== null; match = tagStart.exec(text)) {
    const close = text.indexOf(">", tagStart.lastIndex)
    const end = close === -1 ? text.length : close + 1
    tagStart.lastIndex = end // each tag is scanned once: linear in the text
    if (match[1] !== "/") {
      if (depth === 0) {
        out += text.slice(from, match.index)
        spans++
      }
      depth++
    } else if (depth > 0) {
      depth--
      if (depth === 0) from = end
    }
  }
  if (depth === 0) out += text.slice(from)
  return { text: out, spans }
}

const redactWith = (pattern: SecretPattern, text: string, count: (kind: string) => void): string => {
  pattern.regex.lastIndex = 0
  if (!pattern.regex.test(text)) return text
  pattern.regex.lastIndex = 0
  return text.replace(pattern.regex, (match: string, ...rest: Array<unknown>) => {
    const groups = rest[rest.length - 1] as Record<string, string | undefined> | undefined
    const secret = pattern.keepGroups === true && typeof groups === "object" ? (groups?.secret ?? match) : match
    if (secret.startsWith("[REDACTED:") || pattern.ignore?.(secret) === true) return match
    count(pattern.kind)
    const marker = redactionMarker(pattern.kind)
    if (pattern.keepGroups !== true || typeof groups !== "object") return marker
    return `${groups.prefix ?? ""}${marker}${groups.suffix ?? ""}`
  })
}

/** Filters one string: drops `<private>` spans, redacts secrets. Counts what it did. */
export const filterText = (text: string): string => {
  stringsScanned++
  const dropped = dropPrivateSpans(text)
  privateSpansDropped += dropped.spans
  let result = dropped.text
  const count = (kind: string) => redactedByKind.set(kind, (redactedByKind.get(kind) ?? 0) + 1)
  // A hint shared by consecutive patterns (the three assignments') is tested once per text.
  let hint: RegExp | undefined
  let hintedText: string | undefined
  let hintFound = false
  for (const pattern of activePatterns) {
    if (pattern.hint !== undefined) {
      if (pattern.hint !== hint || hintedText !== result) {
        hint = pattern.hint
        hintedText = result
        hintFound = hint.test(result)
      }
      if (!hintFound) continue
    }
    result = redactWith(pattern, result, count)
  }
  if (result !== text) stringsChanged++
  return result
}

/** Sets `key` of `out` as an own, enumerable data property. */
const defineKey = (out: Record<string, unknown>, key: string, value: unknown) =>
  // defineProperty, not assignment: a JSON key "__proto__" must stay a key, not become a prototype.
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true })

/**
 * Filters `value` below `depth`. A JSON array or object (Array's or Object's prototype, or none) is
 * copied only from its first item, key or value that the filter changes, and otherwise returned as
 * it is: almost every value has nothing to redact, and copying each one was among the largest
 * allocations of a write call on the main thread (docs/benchmarks.md, writes). Any other object
 * becomes a plain object of its own enumerable properties, filtered, as before.
 */
const filterAt = (value: unknown, depth: number): unknown => {
  if (typeof value === "string") return filterText(value)
  if (value === null || typeof value !== "object") return value
  if (depth >= nestingDepthMax) return redactionMarker("too-deep")
  const prototype: unknown = Object.getPrototypeOf(value)
  if (Array.isArray(value)) {
    if (prototype !== Array.prototype) return value.map((item) => filterAt(item, depth + 1))
    let out: Array<unknown> | undefined
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index]
      const filtered = filterAt(item, depth + 1)
      if (out === undefined && filtered !== item) out = value.slice(0, index)
      out?.push(filtered)
    }
    return out ?? value
  }
  const record = value as Record<string, unknown>
  if (prototype !== Object.prototype && prototype !== null) {
    const out: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(record)) defineKey(out, filterText(key), filterAt(item, depth + 1))
    return out
  }
  const keys = Object.keys(record)
  let out: Record<string, unknown> | undefined
  for (let index = 0; index < keys.length; index++) {
    const key = keys[index]!
    const item = record[key]
    const filteredKey = filterText(key)
    const filtered = filterAt(item, depth + 1)
    if (out === undefined && (filteredKey !== key || filtered !== item)) {
      out = {}
      for (let kept = 0; kept < index; kept++) defineKey(out, keys[kept]!, record[keys[kept]!])
    }
    if (out !== undefined) defineKey(out, filteredKey, filtered)
  }
  return out ?? value
}

/**
 * Filters every string of a JSON-like value (and every object key). The input is not modified: what
 * the filter changes comes back in new arrays and objects, and a value with nothing to change comes
 * back as it is. Non-JSON values (numbers, booleans, null) pass unchanged.
 */
export const filterPrivate = (value: unknown): unknown => filterAt(value, 0)

/** `store`, with every command passed through the privacy filter first (imports). */
export const filteredStore = <Command, Reply, Failure>(
  store: Store<Command, Reply, Failure>,
): Store<Command, Reply, Failure> => ({
  ...store,
  send: (command, options) => store.send(filterPrivate(command) as Command, options),
})
