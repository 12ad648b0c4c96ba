/**
 * A large JSON-RPC answer's text in pieces: exactly `JSON.stringify(message)`, made a piece at a
 * time so that a transport writes it without holding it whole. `read_graph` of 10,000 entities
 * answers 6.6 MB of JSON: as one string, its `\n`-terminated copy (flattened when written) and its
 * UTF-8 bytes were all held at once, which set the 10k graph workload's peak (docs/benchmarks.md,
 * "Large answers written in pieces"). Written a piece at a time, each piece's text and bytes are
 * garbage before the next is made (stdout on Linux writes synchronously; elsewhere the stream
 * queues the pieces, no more than the whole text).
 *
 * Plain JSON data only (what a transport sends): plain objects and arrays are walked down to
 * `walkDepthMax` levels, everything below them (an entity, a relation) is one `JSON.stringify`, and
 * a long string at the walked levels (a tool's text content) is cut into slices, never inside a
 * surrogate pair, so every slice is escaped as its characters would be in the whole string. A
 * property test holds the joined pieces to `JSON.stringify` (test/transports/JsonPieces.test.ts).
 */

/** About how many characters a piece holds (a slice of a long string, or a run of small parts). */
export const jsonPieceChars = 64 * 1024

/**
 * Levels walked: the message, its result, the content list or structured content, its lists
 * (`entities`, `relations`), their items. Items deeper down are small: one `JSON.stringify` each.
 */
export const walkDepthMax = 4

const isPlainObject = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== "object" || value === null) return false
  const prototype = Object.getPrototypeOf(value)
  return (
    (prototype === Object.prototype || prototype === null) &&
    typeof (value as { toJSON?: unknown }).toJSON !== "function"
  )
}

/** What `JSON.stringify` leaves out of an object (and writes as `null` in an array). */
const isOmitted = (value: unknown): boolean =>
  value === undefined || typeof value === "function" || typeof value === "symbol"

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff

/** Collects small parts into pieces of about `pieceChars`. */
class Pieces {
  private parts: Array<string> = []
  private chars = 0
  readonly ready: Array<string> = []

  /** At least 2: a slice of a long string never cuts a surrogate pair, so it holds a character at least. */
  readonly pieceChars: number

  constructor(pieceChars: number) {
    this.pieceChars = Math.max(2, pieceChars)
  }

  push(part: string): void {
    this.parts.push(part)
    this.chars += part.length
    if (this.chars >= this.pieceChars) this.flush()
  }

  flush(): void {
    if (this.parts.length === 0) return
    this.ready.push(this.parts.join(""))
    this.parts = []
    this.chars = 0
  }
}

/** The pieces of `JSON.stringify(value)` (a JSON-RPC message: an object). */
export function* jsonPieces(value: object, pieceChars = jsonPieceChars): Generator<string> {
  const pieces = new Pieces(pieceChars)
  // A stack of what is left to write, walked depth first: a value and its depth, or closing text.
  const work: Array<{ readonly value: unknown; readonly depth: number } | string> = [{ value, depth: 0 }]
  while (work.length > 0) {
    const next = work.pop()!
    if (typeof next === "string") pieces.push(next)
    else writeValue(next.value, next.depth, pieces, work)
    while (pieces.ready.length > 0) yield pieces.ready.shift()!
  }
  pieces.flush()
  yield* pieces.ready
}

const writeValue = (
  value: unknown,
  depth: number,
  pieces: Pieces,
  work: Array<{ readonly value: unknown; readonly depth: number } | string>,
): void => {
  if (depth < walkDepthMax && Array.isArray(value)) {
    pieces.push("[")
    work.push("]")
    for (let i = value.length - 1; i >= 0; i--) {
      const item = isOmitted(value[i]) ? null : value[i]
      work.push({ value: item, depth: depth + 1 })
      if (i > 0) work.push(",")
    }
    return
  }
  if (depth < walkDepthMax && isPlainObject(value)) {
    const keys = Object.keys(value).filter((key) => !isOmitted(value[key]))
    pieces.push("{")
    work.push("}")
    for (let i = keys.length - 1; i >= 0; i--) {
      work.push({ value: value[keys[i]!], depth: depth + 1 })
      work.push(`${i > 0 ? "," : ""}${JSON.stringify(keys[i])}:`)
    }
    return
  }
  if (typeof value === "string" && value.length > pieces.pieceChars) {
    pieces.push('"')
    const step = pieces.pieceChars
    for (let at = 0; at < value.length; ) {
      let end = Math.min(value.length, at + step)
      // A pair cut in two would be escaped as two lone surrogates: the cut moves before it.
      if (end < value.length && isHighSurrogate(value.charCodeAt(end - 1))) end--
      pieces.push(JSON.stringify(value.slice(at, end)).slice(1, -1))
      at = end
    }
    pieces.push('"')
    return
  }
  pieces.push(JSON.stringify(value) ?? "null")
}
