/**
 * CRC-32C (Castagnoli), as the WAL's records and a shared memory's stream names carry it: SheetJS's
 * crc-32 (plain JavaScript, 16 bytes a step: about 2 GB/s, 0.6 µs for a 1 KiB record). The native
 * addon it replaces (@node-rs/crc32, 6.5 GB/s) cost every process 4–6 ms and 3.7 MiB resident to
 * load, for well under a microsecond of a write call (docs/benchmarks.md, footprint).
 */
// A CommonJS module whose names Node cannot see from an ES module: its exports object, as a whole.
import crc32cOf from "crc-32/crc32c"

/** The CRC-32C of `bytes`, unsigned. */
export const crc32c = (bytes: Uint8Array): number => crc32cOf.buf(bytes) >>> 0
