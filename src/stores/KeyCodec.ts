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

/** The bytes of a key. */
export const encodeKey = (key: string): Buffer => {
  if (key.isWellFormed()) return Buffer.from(key, "utf8")
  const bytes: Array<number> = []
  for (let index = 0; index < key.length; index++) {
    const unit = key.charCodeAt(index)
    const next = key.charCodeAt(index + 1)
    if (unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      bytes.push(...Buffer.from(key.slice(index, index + 2), "utf8"))
      index++
    } else if (unit >= 0xd800 && unit <= 0xdfff) {
      bytes.push(0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f))
    } else {
      bytes.push(...Buffer.from(key[index]!, "utf8"))
    }
  }
  return Buffer.from(bytes)
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
