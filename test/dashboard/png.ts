/**
 * Just enough PNG decoding to look at a screenshot's pixels: 8-bit RGB/RGBA, not interlaced
 * (what Chromium writes). Used to check that the WebGL graph really drew something.
 */
import { inflateSync } from "node:zlib"

export interface Pixels {
  readonly width: number
  readonly height: number
  /** RGBA, row by row. */
  readonly rgba: Uint8Array
}

const paeth = (a: number, b: number, c: number) => {
  const p = a + b - c
  const pa = Math.abs(p - a)
  const pb = Math.abs(p - b)
  const pc = Math.abs(p - c)
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c
}

export const decodePng = (png: Buffer): Pixels => {
  let offset = 8
  let width = 0
  let height = 0
  let channels = 0
  const data: Array<Buffer> = []
  while (offset < png.length) {
    const length = png.readUInt32BE(offset)
    const type = png.toString("ascii", offset + 4, offset + 8)
    const body = png.subarray(offset + 8, offset + 8 + length)
    if (type === "IHDR") {
      width = body.readUInt32BE(0)
      height = body.readUInt32BE(4)
      const depth = body[8]
      const color = body[9]
      if (depth !== 8 || (color !== 2 && color !== 6) || body[12] !== 0) throw new Error("unsupported PNG")
      channels = color === 6 ? 4 : 3
    } else if (type === "IDAT") data.push(body)
    offset += 12 + length
  }
  const raw = inflateSync(Buffer.concat(data))
  const stride = width * channels
  const out = new Uint8Array(width * height * 4)
  const previous = new Uint8Array(stride)
  const row = new Uint8Array(stride)
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1))
    for (let x = 0; x < stride; x++) {
      const left = x >= channels ? row[x - channels]! : 0
      const up = previous[x]!
      const upLeft = x >= channels ? previous[x - channels]! : 0
      const value = line[x]!
      row[x] =
        (filter === 0
          ? value
          : filter === 1
            ? value + left
            : filter === 2
              ? value + up
              : filter === 3
                ? value + ((left + up) >> 1)
                : value + paeth(left, up, upLeft)) & 0xff
    }
    for (let x = 0; x < width; x++) {
      out.set(
        [
          row[x * channels]!,
          row[x * channels + 1]!,
          row[x * channels + 2]!,
          channels === 4 ? row[x * channels + 3]! : 255,
        ],
        (y * width + x) * 4,
      )
    }
    previous.set(row)
  }
  return { width, height, rgba: out }
}

/** How many pixels are within `tolerance` (per channel) of the colour `#rrggbb`. */
export const pixelsNear = (pixels: Pixels, hex: string, tolerance = 24): number => {
  const r = Number.parseInt(hex.slice(1, 3), 16)
  const g = Number.parseInt(hex.slice(3, 5), 16)
  const b = Number.parseInt(hex.slice(5, 7), 16)
  let count = 0
  for (let index = 0; index < pixels.rgba.length; index += 4) {
    if (
      Math.abs(pixels.rgba[index]! - r) <= tolerance &&
      Math.abs(pixels.rgba[index + 1]! - g) <= tolerance &&
      Math.abs(pixels.rgba[index + 2]! - b) <= tolerance
    )
      count++
  }
  return count
}
