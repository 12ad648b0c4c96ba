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

  /** At least 2: a slice of a long string never cuts a surrogate pair, so it holds a character at least. */
  readonly pieceChars: number

  constructor(pieceChars: number) {
    this.pieceChars = Math.max(2, pieceChars)
  }

  /** Adds `part`; true when it completes a piece (`take` it). */
  push(part: string): boolean {
    this.parts.push(part)
    this.chars += part.length
    return this.chars >= this.pieceChars
  }

  /** What is collected, as one piece (undefined when nothing is). */
  take(): string | undefined {
    if (this.parts.length === 0) return undefined
    const piece = this.parts.join("")
    this.parts = []
    this.chars = 0
    return piece
  }
}

/** The pieces of `JSON.stringify(value)` (a JSON-RPC message: an object). */
export function* jsonPieces(value: object, pieceChars = jsonPieceChars): Generator<string> {
  const pieces = new Pieces(pieceChars)
  if (!isWalked(value, 0, pieces)) {
    yield JSON.stringify(value)
    return
  }
  yield* walk(value, 0, pieces)
  const last = pieces.take()
  if (last !== undefined) yield last
}

/** Whether `value` at `depth` is walked (recursed into, or sliced) rather than written as one part. */
const isWalked = (value: unknown, depth: number, pieces: Pieces): boolean =>
  typeof value === "string"
    ? value.length > pieces.pieceChars
    : depth < walkDepthMax && (Array.isArray(value) || isPlainObject(value))

/**
 * Writes `value`, one `isWalked`: a list or object part by part (its walked members recursed
 * into, at most `walkDepthMax` deep), a long string slice by slice; yields each piece completed.
 */
function* walk(value: unknown, depth: number, pieces: Pieces): Generator<string> {
  if (typeof value === "string") {
    if (pieces.push('"')) yield pieces.take()!
    for (let at = 0; at < value.length; ) {
      let end = Math.min(value.length, at + pieces.pieceChars)
      // A pair cut in two would be escaped as two lone surrogates: the cut moves before it.
      if (end < value.length && isHighSurrogate(value.charCodeAt(end - 1))) end--
      if (pieces.push(JSON.stringify(value.slice(at, end)).slice(1, -1))) yield pieces.take()!
      at = end
    }
    if (pieces.push('"')) yield pieces.take()!
    return
  }
  const list = Array.isArray(value)
  const record = value as Record<string, unknown>
  const names = list ? undefined : Object.keys(record).filter((name) => !isOmitted(record[name]))
  const count = list ? (value as Array<unknown>).length : names!.length
  if (pieces.push(list ? "[" : "{")) yield pieces.take()!
  for (let i = 0; i < count; i++) {
    const member = list ? (value as Array<unknown>)[i] : record[names![i]!]
    const item = list && isOmitted(member) ? null : member
    const head = list ? (i > 0 ? "," : "") : `${i > 0 ? "," : ""}${JSON.stringify(names![i])}:`
    if (head !== "" && pieces.push(head)) yield pieces.take()!
    if (isWalked(item, depth + 1, pieces)) yield* walk(item, depth + 1, pieces)
    else if (pieces.push(JSON.stringify(item) ?? "null")) yield pieces.take()!
  }
  if (pieces.push(list ? "]" : "}")) yield pieces.take()!
}
