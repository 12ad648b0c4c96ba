/**
 * Reads a JSONL file line by line with bounded memory: at most one line (of at most
 * `lineBytesMax` bytes) plus one read buffer is held at a time. A line longer than the limit is
 * reported as such without being read whole; bytes that are not UTF-8 are reported too.
 * Lines end in "\n" (a "\r" before it is dropped); a last line without "\n" counts.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs"

/** Bytes read from the file per system call: 1 MiB. */
const readChunkBytes = 1024 * 1024

/** One line of the file, or why it could not be read. */
export type JsonlLine =
  | { readonly _tag: "Line"; readonly line: number; readonly text: string; readonly bytes: number }
  | { readonly _tag: "TooLong"; readonly line: number }
  | { readonly _tag: "NotUtf8"; readonly line: number }

/** Progress through the file. */
export interface FileProgress {
  readonly bytesRead: number
  readonly bytesTotal: number
}

const decoder = new TextDecoder("utf-8", { fatal: true })

/**
 * The lines of `path`, 1-based. Stops after a `TooLong` line. Throws only for I/O errors (the
 * caller wraps the iteration in `Effect.try`).
 */
export function* readJsonlLines(
  path: string,
  lineBytesMax: number,
  onProgress?: (progress: FileProgress) => void,
): Generator<JsonlLine> {
  const fd = openSync(path, "r")
  try {
    const bytesTotal = fstatSync(fd).size
    const buffer = Buffer.allocUnsafe(readChunkBytes)
    let parts: Array<Buffer> = []
    let partBytes = 0
    let line = 1
    let bytesRead = 0
    const finish = (piece: Buffer): JsonlLine => {
      const whole = parts.length === 0 ? piece : Buffer.concat([...parts, piece])
      parts = []
      partBytes = 0
      const content = whole.length > 0 && whole[whole.length - 1] === 0x0d ? whole.subarray(0, -1) : whole
      const number = line++
      try {
        return { _tag: "Line", line: number, text: decoder.decode(content), bytes: content.length }
      } catch {
        return { _tag: "NotUtf8", line: number }
      }
    }
    while (true) {
      const count = readSync(fd, buffer, 0, readChunkBytes, null)
      if (count === 0) break
      bytesRead += count
      let start = 0
      while (start < count) {
        const newline = buffer.indexOf(0x0a, start)
        const end = newline < 0 || newline >= count ? count : newline
        if (partBytes + (end - start) > lineBytesMax + 1) {
          yield { _tag: "TooLong", line }
          return
        }
        if (newline < 0 || newline >= count) {
          parts.push(Buffer.from(buffer.subarray(start, count)))
          partBytes += count - start
          break
        }
        const piece = buffer.subarray(start, newline)
        const result = finish(piece)
        if (result._tag === "Line" && result.bytes > lineBytesMax) {
          yield { _tag: "TooLong", line: result.line }
          return
        }
        yield result
        start = newline + 1
      }
      onProgress?.({ bytesRead, bytesTotal })
    }
    if (partBytes > 0) {
      const result = finish(Buffer.alloc(0))
      if (result._tag === "Line" && result.bytes > lineBytesMax) yield { _tag: "TooLong", line: result.line }
      else yield result
    }
  } finally {
    closeSync(fd)
  }
}
