/**
 * Store keys as bytes. Keys are JavaScript strings; LMDB stores them as WTF-8: UTF-8, except that
 * a lone surrogate (possible in a JavaScript string, not in UTF-8) is written as its own 3-byte
 * sequence, so every string — an entity name with half an emoji included — has exactly one key
 * and decodes back unchanged. Byte order equals code point order, which the key layouts' ranges
 * rely on (`[prefix\0, prefix\u0001)`).
 *
 * (lmdb-js's default "ordered-binary" string keys cannot be used: it decodes long keys that
 * contain U+0000 or U+0001 as arrays.)
 */

/**
 * Writes the bytes of `key` into `target` at `start` and returns where they end; throws
 * `RangeError` when they do not fit (nothing is cut short).
 */
export const encodeKeyInto = (key: string, target: Buffer, start: number): number => {
  if (key.length >= 64 && key.isWellFormed()) {
    // Long keys: the native encoder beats the loop below.
    const end = start + target.write(key, start, target.length - start, "utf8")
    // A key that filled the buffer may have been cut short.
    if (end >= target.length - 3 && Buffer.byteLength(key) !== end - start) throw tooLong()
    return end
  }
  let position = start
  for (let index = 0; index < key.length; index++) {
    const unit = key.charCodeAt(index)
    const next = key.charCodeAt(index + 1)
    if (unit < 0x80) target[position++] = unit
    else if (unit < 0x800) {
      target[position++] = 0xc0 | (unit >> 6)
      target[position++] = 0x80 | (unit & 0x3f)
    } else if (unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      const point = 0x10000 + ((unit - 0xd800) << 10) + (next - 0xdc00)
      target[position++] = 0xf0 | (point >> 18)
      target[position++] = 0x80 | ((point >> 12) & 0x3f)
      target[position++] = 0x80 | ((point >> 6) & 0x3f)
      target[position++] = 0x80 | (point & 0x3f)
      index++
    } else {
      // Includes a lone surrogate, written as its own 3-byte sequence.
      target[position++] = 0xe0 | (unit >> 12)
      target[position++] = 0x80 | ((unit >> 6) & 0x3f)
      target[position++] = 0x80 | (unit & 0x3f)
    }
  }
  // Bytes past the end of a Buffer are dropped silently: check once, after the loop.
  if (position > target.length) throw tooLong()
  return position
}

const tooLong = () => new RangeError("the key does not fit in the key buffer")

/** The bytes of a key. */
export const encodeKey = (key: string): Buffer => {
  // At most 3 bytes per UTF-16 unit (a surrogate pair: 4 bytes for 2 units).
  const target = Buffer.allocUnsafe(key.length * 3)
  return target.subarray(0, encodeKeyInto(key, target, 0))
}

const hasEncodedSurrogate = (bytes: Uint8Array): boolean => {
  for (let index = 0; index + 1 < bytes.length; index++)
    if (bytes[index] === 0xed && bytes[index + 1]! >= 0xa0) return true
  return false
}

/** The key a stored byte string stands for. */
export const decodeKey = (bytes: Uint8Array): string => {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (!hasEncodedSurrogate(buffer)) return buffer.toString("utf8")
  let out = ""
  let start = 0
  for (let index = 0; index + 2 < buffer.length + 1; index++) {
    if (buffer[index] === 0xed && buffer[index + 1]! >= 0xa0) {
      out += buffer.toString("utf8", start, index)
      out += String.fromCharCode(
        ((buffer[index]! & 0x0f) << 12) | ((buffer[index + 1]! & 0x3f) << 6) | (buffer[index + 2]! & 0x3f),
      )
      index += 2
      start = index + 1
    }
  }
  return out + buffer.toString("utf8", start)
}

/**
 * The same encoding as lmdb-js's `keyEncoder`: it writes a key straight into lmdb-js's key buffer
 * and reads it back from there, so a get or put allocates no key `Buffer`. The bytes are exactly
 * `encodeKey`'s (the database keeps lmdb-js's binary key type), so data written either way reads
 * back either way. A key that does not fit throws `RangeError`, which lmdb-js reports as a key
 * larger than the maximum key size.
 */
export const keyEncoder = {
  writeKey: (key: string | Uint8Array, target: Buffer, start: number): number => {
    if (typeof key === "string") return encodeKeyInto(key, target, start)
    // lmdb-js's own default range start (a byte string).
    target.set(key, start)
    return start + key.length
  },
  readKey: (source: Uint8Array, start: number, end: number): string => decodeKey(source.subarray(start, end)),
}

/**
 * The options of an lmdb-js database whose keys are strings in this encoding (`keyEncoder`), its
 * values in `encoding`. Built here, not written inline: `keyEncoder` is a database option
 * lmdb-js's types list only for the root environment.
 */
export const keyedDatabase = (name: string, encoding: "json" | "binary") => ({ name, encoding, keyEncoder })

const isSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdfff
const isHighSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdbff
const isLowSurrogate = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff

/**
 * Orders keys as LMDB does: by their KeyCodec bytes, i.e. by code point, with a lone surrogate
 * ordered by its own value (between U+D7FF and U+E000), as WTF-8 writes it. JavaScript's `<`
 * orders UTF-16 code units instead, which puts an astral character (a surrogate pair, from
 * U+D800) before U+E000–U+FFFF, where its bytes sort after them.
 */
export const compareKeys = (a: string, b: string): number => {
  const length = Math.min(a.length, b.length)
  for (let index = 0; index < length; index++) {
    const unitA = a.charCodeAt(index)
    const unitB = b.charCodeAt(index)
    if (unitA === unitB) continue
    // No surrogate at the first difference: code units order as code points (the common case).
    if (!isSurrogate(unitA) && !isSurrogate(unitB)) return unitA - unitB
    return compareCodePointsAt(a, b, index)
  }
  // A key that is a prefix of another sorts first, in bytes too (a trailing lone high surrogate
  // encodes below any astral character that would pair it).
  return a.length - b.length
}

/** Compares the code points that contain the first differing code unit, at `index`, of `a` and `b`. */
const compareCodePointsAt = (a: string, b: string, index: number): number => {
  // The shared unit before may be a high surrogate that pairs with one key's unit at `index` and
  // not the other's: then the keys differ from that code point on.
  const pairsBack =
    index > 0 &&
    isHighSurrogate(a.charCodeAt(index - 1)) &&
    (isLowSurrogate(a.charCodeAt(index)) || isLowSurrogate(b.charCodeAt(index)))
  const start = pairsBack ? index - 1 : index
  // `codePointAt` gives a lone surrogate's own value, as WTF-8 encodes it.
  return a.codePointAt(start)! - b.codePointAt(start)!
}
