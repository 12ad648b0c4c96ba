/**
 * Clipboard images as pixels: decoding what the clipboard or a caller holds (PNG or JPEG), fitting
 * it within a maximum size, and encoding it for the caller (JPEG by default, PNG when asked) or for
 * the clipboard (PNG, the type every Linux application pastes).
 *
 * The codecs are pure JavaScript (`pngjs`, `jpeg-js`): nothing native to build or download, and the
 * work is small next to a tool call (a screenshot decodes and encodes in well under a second).
 * Every size is bounded before pixels are allocated: the encoded bytes (`clipboardImageBytesMax`,
 * checked by the callers) and the pixel count (`imagePixelsMax`, read from the header first).
 * They are loaded on first use: a daemon that never touches an image does not pay for them at
 * start (about 10 ms of its start-up, docs/benchmarks.md, footprint).
 */
import { createRequire } from "node:module"

type Codecs = { readonly jpeg: typeof import("jpeg-js"); readonly PNG: typeof import("pngjs").PNG }
let loaded: Codecs | undefined
/** The codecs (CommonJS packages), required the first time an image is decoded or encoded. */
const codecs = (): Codecs => {
  if (loaded === undefined) {
    const require = createRequire(import.meta.url)
    loaded = { jpeg: require("jpeg-js"), PNG: (require("pngjs") as typeof import("pngjs")).PNG }
  }
  return loaded
}

/** Most pixels an image may have to be decoded (a 5K screen has 14.7 million). */
export const imagePixelsMax = 16 * 1024 * 1024
/** Smallest side a fitted image is scaled down to before giving up on a byte budget. */
const fittedSideMin = 16
/** How many times an encoding is retried smaller to meet a byte budget. */
const fitAttemptsMax = 8

/** 8-bit RGBA pixels, row after row. */
export interface RgbaImage {
  readonly width: number
  readonly height: number
  readonly data: Uint8Array
}

export type ImageMimeType = "image/png" | "image/jpeg"

/** An encoded image. */
export interface EncodedImage {
  readonly bytes: Buffer
  readonly mimeType: ImageMimeType
  readonly width: number
  readonly height: number
}

/** Why an image could not be decoded or encoded as asked. */
export interface ImageProblem {
  readonly reason: "BadImage" | "TooLarge"
  readonly message: string
}

const pngSignature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

/** The type of encoded image bytes, from their signature. */
export const sniffImage = (bytes: Uint8Array): ImageMimeType | undefined =>
  Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, 8)).equals(pngSignature)
    ? "image/png"
    : bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff
      ? "image/jpeg"
      : undefined

const tooManyPixels = (width: number, height: number): ImageProblem => ({
  reason: "TooLarge",
  message: `the image is ${width}×${height} pixels, more than the ${imagePixelsMax} mnemos decodes`,
})

/** Decodes PNG or JPEG bytes to RGBA, refusing other formats and images over `imagePixelsMax`. */
export const decodeImage = (bytes: Buffer): { image: RgbaImage; mimeType: ImageMimeType } | ImageProblem => {
  const mimeType = sniffImage(bytes)
  if (mimeType === undefined)
    return { reason: "BadImage", message: "the bytes are neither a PNG nor a JPEG image (no PNG or JPEG signature)" }
  try {
    if (mimeType === "image/png") {
      // IHDR is the first chunk: width and height at bytes 16 and 20.
      if (bytes.length < 24) return { reason: "BadImage", message: "the PNG image is truncated" }
      const width = bytes.readUInt32BE(16)
      const height = bytes.readUInt32BE(20)
      if (width * height > imagePixelsMax) return tooManyPixels(width, height)
      const png = codecs().PNG.sync.read(bytes)
      return { image: { width: png.width, height: png.height, data: png.data }, mimeType }
    }
    const decoded = codecs().jpeg.decode(bytes, {
      useTArray: true,
      formatAsRGBA: true,
      maxResolutionInMP: imagePixelsMax / 1e6,
      maxMemoryUsageInMB: Math.ceil((imagePixelsMax * 4 * 2) / 1e6),
    })
    return { image: { width: decoded.width, height: decoded.height, data: decoded.data }, mimeType }
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error)
    if (/maxResolutionInMP|maxMemoryUsageInMB/.test(detail))
      return { reason: "TooLarge", message: `the JPEG image has more than ${imagePixelsMax} pixels` }
    return {
      reason: "BadImage",
      message: `the ${mimeType === "image/png" ? "PNG" : "JPEG"} image is damaged: ${detail}`,
    }
  }
}

/**
 * `image` scaled down, keeping its aspect ratio, to fit within `maxWidth`×`maxHeight` (never
 * scaled up). Each target pixel is the average of the source pixels it covers, so text in a
 * screenshot stays legible.
 */
export const fitWithin = (image: RgbaImage, maxWidth: number, maxHeight: number): RgbaImage => {
  const scale = Math.min(1, maxWidth / image.width, maxHeight / image.height)
  if (scale === 1) return image
  const width = Math.max(1, Math.floor(image.width * scale))
  const height = Math.max(1, Math.floor(image.height * scale))
  const data = new Uint8Array(width * height * 4)
  const sums = new Float64Array(4)
  for (let y = 0; y < height; y++) {
    const y0 = Math.floor((y * image.height) / height)
    const y1 = Math.max(y0 + 1, Math.floor(((y + 1) * image.height) / height))
    for (let x = 0; x < width; x++) {
      const x0 = Math.floor((x * image.width) / width)
      const x1 = Math.max(x0 + 1, Math.floor(((x + 1) * image.width) / width))
      sums.fill(0)
      for (let sy = y0; sy < y1; sy++)
        for (let sx = x0; sx < x1; sx++) {
          const at = (sy * image.width + sx) * 4
          for (let channel = 0; channel < 4; channel++) sums[channel]! += image.data[at + channel]!
        }
      const count = (y1 - y0) * (x1 - x0)
      const out = (y * width + x) * 4
      for (let channel = 0; channel < 4; channel++) data[out + channel] = Math.round(sums[channel]! / count)
    }
  }
  return { width, height, data }
}

/** PNG bytes of `image`. */
export const encodePng = (image: RgbaImage): Buffer => {
  const { PNG } = codecs()
  const png = new PNG({ width: image.width, height: image.height })
  png.data = Buffer.from(image.data.buffer, image.data.byteOffset, image.data.length)
  return PNG.sync.write(png)
}

/** JPEG bytes of `image` at `quality` (1–100); transparent pixels are laid on white (JPEG has no alpha). */
export const encodeJpeg = (image: RgbaImage, quality: number): Buffer => {
  const data = Buffer.alloc(image.data.length)
  for (let at = 0; at < data.length; at += 4) {
    const alpha = image.data[at + 3]! / 255
    for (let channel = 0; channel < 3; channel++)
      data[at + channel] = Math.round(image.data[at + channel]! * alpha + 255 * (1 - alpha))
    data[at + 3] = 255
  }
  return codecs().jpeg.encode({ width: image.width, height: image.height, data }, quality).data
}

/** How a caller wants a clipboard image. */
export interface ImageRequest {
  readonly encoding: "jpeg" | "png"
  /** JPEG quality, 1–100. */
  readonly quality: number
  readonly maxWidth: number
  readonly maxHeight: number
  readonly maxBytes: number
}

/**
 * The clipboard image as `request` asks: PNG bytes are handed on unchanged when PNG is asked and
 * they already fit; otherwise the image is fitted within the maximum size and encoded, then scaled
 * down further (each time by the square root of the overshoot, and 10% more) until it fits
 * `maxBytes`.
 */
export const encodeForCaller = (
  source: Buffer,
  request: ImageRequest,
): { image: EncodedImage; source: { mimeType: ImageMimeType; width: number; height: number } } | ImageProblem => {
  const decoded = decodeImage(source)
  if ("reason" in decoded) return decoded
  const { image, mimeType } = decoded
  const sourceInfo = { mimeType, width: image.width, height: image.height }
  const fitsAsIs = image.width <= request.maxWidth && image.height <= request.maxHeight
  if (request.encoding === "png" && mimeType === "image/png" && fitsAsIs && source.length <= request.maxBytes)
    return { image: { bytes: source, mimeType, width: image.width, height: image.height }, source: sourceInfo }
  let fitted = fitWithin(image, request.maxWidth, request.maxHeight)
  for (let attempt = 0; attempt < fitAttemptsMax; attempt++) {
    const bytes = request.encoding === "png" ? encodePng(fitted) : encodeJpeg(fitted, request.quality)
    if (bytes.length <= request.maxBytes)
      return {
        image: {
          bytes,
          mimeType: request.encoding === "png" ? "image/png" : "image/jpeg",
          width: fitted.width,
          height: fitted.height,
        },
        source: sourceInfo,
      }
    const shrink = Math.sqrt(request.maxBytes / bytes.length) * 0.9
    const width = Math.floor(fitted.width * shrink)
    const height = Math.floor(fitted.height * shrink)
    if (Math.min(width, height) < fittedSideMin) break
    fitted = fitWithin(fitted, width, height)
  }
  return {
    reason: "TooLarge",
    message: `the ${image.width}×${image.height} image does not fit in ${request.maxBytes} bytes as ${request.encoding.toUpperCase()} even scaled down; raise maxBytes${request.encoding === "jpeg" ? " or lower quality" : " or ask for jpeg"}`,
  }
}
