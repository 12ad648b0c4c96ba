/** crc-32's CRC-32C module (its own types cover only its CRC-32 one), a CommonJS module. */
declare module "crc-32/crc32c" {
  const crc32c: {
    /** The CRC-32C of `data`, as a signed 32-bit integer, continuing from `seed`. */
    readonly buf: (data: Uint8Array | ReadonlyArray<number>, seed?: number) => number
  }
  export default crc32c
}
