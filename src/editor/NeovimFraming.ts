/**
 * A gate between a socket and the `neovim` client: it cuts the byte stream into whole
 * msgpack-RPC messages and passes on only well-formed answers to requests the client sent.
 *
 * Why: the client decodes in a promise chain without an error handler, so a peer that is not
 * Neovim (an address reused by another program, a forged focus datagram) would make it throw an
 * unhandled rejection, which ends the daemon. Here every message is checked first — valid
 * msgpack, within `rpcMessageBytesMax`, nesting within `rpcDepthMax`, map keys strings or
 * integers, extension types only Neovim's handles (0-2, each one integer) — and must be a
 * response `[1, id, error, result]` whose `id` the client is waiting for. Requests and
 * notifications from Neovim are dropped (the tools use none). Anything else ends the
 * connection with a message saying the peer does not speak Neovim's RPC.
 */

/** Largest message accepted from Neovim (buffer reads are bounded far below this). */
export const rpcMessageBytesMax = 16 * 1024 * 1024
/** Deepest nesting of arrays and maps accepted. */
export const rpcDepthMax = 64

type Scan = { readonly end: number } | "incomplete" | { readonly invalid: string }

const lengthAt = (bytes: Uint8Array, offset: number, width: 1 | 2 | 4): number | undefined => {
  if (offset + width > bytes.length) return undefined
  let value = 0
  for (let index = 0; index < width; index++) value = value * 256 + bytes[offset + index]!
  return value
}

const isIntegerHeader = (byte: number) => byte <= 0x7f || byte >= 0xe0 || (byte >= 0xcc && byte <= 0xd3)
const isStringHeader = (byte: number) => (byte >= 0xa0 && byte <= 0xbf) || (byte >= 0xd9 && byte <= 0xdb)

/** Scans the msgpack value at `offset`: where it ends, or that more bytes are needed, or why it is invalid. */
export const scanValue = (bytes: Uint8Array, offset: number, depth = 0): Scan => {
  if (depth > rpcDepthMax) return { invalid: `nesting deeper than ${rpcDepthMax}` }
  if (offset >= bytes.length) return "incomplete"
  const byte = bytes[offset]!
  const fixed = (size: number): Scan => (offset + size <= bytes.length ? { end: offset + size } : "incomplete")
  const sized = (width: 1 | 2 | 4, extra = 0): Scan => {
    const length = lengthAt(bytes, offset + 1, width)
    return length === undefined ? "incomplete" : fixed(1 + width + extra + length)
  }
  const items = (count: number, headerSize: number, map: boolean): Scan => {
    let position = offset + headerSize
    for (let index = 0; index < count * (map ? 2 : 1); index++) {
      const key = bytes[position]
      if (map && index % 2 === 0 && key !== undefined && !isIntegerHeader(key) && !isStringHeader(key))
        return { invalid: "a map key that is neither a string nor an integer" }
      const scanned = scanValue(bytes, position, depth + 1)
      if (scanned === "incomplete" || "invalid" in scanned) return scanned
      position = scanned.end
    }
    return { end: position }
  }
  const extension = (width: 0 | 1 | 2 | 4, size?: number): Scan => {
    const length = width === 0 ? size : lengthAt(bytes, offset + 1, width)
    if (length === undefined) return "incomplete"
    const typeAt = offset + 1 + width
    if (typeAt + 1 + length > bytes.length) return "incomplete"
    const type = bytes[typeAt]!
    if (type > 2) return { invalid: `extension type ${type > 127 ? type - 256 : type}` }
    const payload = bytes.subarray(typeAt + 1, typeAt + 1 + length)
    const inner = scanValue(payload, 0, depth + 1)
    if (inner === "incomplete" || "invalid" in inner || inner.end !== length || !isIntegerHeader(payload[0]!))
      return { invalid: "a Neovim handle that is not one integer" }
    return { end: typeAt + 1 + length }
  }
  if (byte <= 0x7f || byte >= 0xe0) return fixed(1)
  if (byte <= 0x8f) return items(byte & 0x0f, 1, true)
  if (byte <= 0x9f) return items(byte & 0x0f, 1, false)
  if (byte <= 0xbf) return fixed(1 + (byte & 0x1f))
  switch (byte) {
    case 0xc0:
    case 0xc2:
    case 0xc3:
      return fixed(1)
    case 0xc4:
    case 0xd9:
      return sized(1)
    case 0xc5:
    case 0xda:
      return sized(2)
    case 0xc6:
    case 0xdb:
      return sized(4)
    case 0xc7:
      return extension(1)
    case 0xc8:
      return extension(2)
    case 0xc9:
      return extension(4)
    case 0xca:
      return fixed(5)
    case 0xcb:
      return fixed(9)
    case 0xcc:
    case 0xd0:
      return fixed(2)
    case 0xcd:
    case 0xd1:
      return fixed(3)
    case 0xce:
    case 0xd2:
      return fixed(5)
    case 0xcf:
    case 0xd3:
      return fixed(9)
    case 0xd4:
      return extension(0, 1)
    case 0xd5:
      return extension(0, 2)
    case 0xd6:
      return extension(0, 4)
    case 0xd7:
      return extension(0, 8)
    case 0xd8:
      return extension(0, 16)
    case 0xdc:
    case 0xdd: {
      const count = lengthAt(bytes, offset + 1, byte === 0xdc ? 2 : 4)
      return count === undefined ? "incomplete" : items(count, byte === 0xdc ? 3 : 5, false)
    }
    case 0xde:
    case 0xdf: {
      const count = lengthAt(bytes, offset + 1, byte === 0xde ? 2 : 4)
      return count === undefined ? "incomplete" : items(count, byte === 0xde ? 3 : 5, true)
    }
    default:
      return { invalid: `the byte 0x${byte.toString(16)}` }
  }
}

/** The unsigned integer encoded at `offset` (a message id), if it is one. */
const unsignedAt = (bytes: Uint8Array, offset: number): number | undefined => {
  const byte = bytes[offset]
  if (byte === undefined) return undefined
  if (byte <= 0x7f) return byte
  if (byte === 0xcc) return lengthAt(bytes, offset + 1, 1)
  if (byte === 0xcd) return lengthAt(bytes, offset + 1, 2)
  if (byte === 0xce) return lengthAt(bytes, offset + 1, 4)
  return undefined
}

/** What one chunk of input yielded: whole messages to pass on, or why the peer is refused. */
export type FramerOutput = { readonly messages: ReadonlyArray<Uint8Array> } | { readonly refused: string }

/** Cuts Neovim's byte stream into messages, checking each (see the module comment). */
export const makeRpcFramer = (isAwaited: (id: number) => boolean) => {
  let buffered: Uint8Array = new Uint8Array(0)
  return (chunk: Uint8Array): FramerOutput => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk])
    const messages: Array<Uint8Array> = []
    let offset = 0
    while (offset < buffered.length) {
      const scanned = scanValue(buffered, offset)
      if (scanned === "incomplete") {
        if (buffered.length - offset > rpcMessageBytesMax)
          return { refused: `a message larger than ${rpcMessageBytesMax} bytes` }
        break
      }
      if ("invalid" in scanned) return { refused: `invalid msgpack (${scanned.invalid})` }
      const header = buffered[offset]
      const type = buffered[offset + 1]
      if (header === 0x94 && type === 0x01) {
        const id = unsignedAt(buffered, offset + 2)
        if (id === undefined || !isAwaited(id))
          return { refused: `an answer to request ${id ?? "?"}, which was not asked` }
        messages.push(buffered.slice(offset, scanned.end))
      } else if (!((header === 0x94 && type === 0x00) || (header === 0x93 && type === 0x02)))
        return { refused: "a message that is not a msgpack-RPC request, response or notification" }
      offset = scanned.end
    }
    buffered = buffered.subarray(offset)
    return { messages }
  }
}
