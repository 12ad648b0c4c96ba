/**
 * The on-disk shape of WAL segments and records.
 *
 * Segment file `wal-<firstSeq, 20 digits>.log` = a 32-byte header, then records back to back:
 *
 *   header: magic "MNWAL001" (8) | salt u32 | firstSeq u64 | crc32c of the preceding 20 bytes u32 | zero (8)
 *   record: payloadLength u32 | crc32c u32 | seq u64 | salt u32 | type u8 | flags u8 | zero u16 | payload
 *
 * All integers little-endian. The record CRC covers everything after itself (seq .. payload), so a
 * torn or flipped byte anywhere in a record is caught. `salt` is the store generation: records of
 * an older generation left in a reused file are never mistaken for current ones. Sequence numbers
 * are gap-free per store. `flags & batchEndFlag` marks the last record of a group-committed batch:
 * recovery applies whole batches only, so an unacknowledged batch is all or nothing.
 * `flags & batchStartFlag` marks the first: recovery tells a torn last batch (damage followed only
 * by records of the same batch) from corruption (damage followed by the start of a later batch).
 */
import { crc32c } from "./Crc32c.ts"

export const segmentMagic = "MNWAL001"
export const segmentHeaderBytes = 32
export const recordHeaderBytes = 24
/** The largest payload one record may carry; bigger commands are refused before they reach the WAL. */
export const recordPayloadBytesMax = 16 * 1024 * 1024
/** Set on the last record of a batch. */
export const batchEndFlag = 1
/** Set on the first record of a batch. */
export const batchStartFlag = 2

/** One decoded record. */
export interface WalRecord {
  readonly seq: number
  readonly type: number
  readonly flags: number
  readonly payload: Uint8Array
  /** Set by a shared log on a batch's last record: the batch's position in the log. */
  readonly position?: number
  /** Set by a shared log on a batch's last record: the daemon that appended it. */
  readonly origin?: string
}

/** File name of the segment whose first record has `firstSeq`; names sort in sequence order. */
export const segmentFileName = (firstSeq: number): string => `wal-${String(firstSeq).padStart(20, "0")}.log`

/** The first sequence a segment file name announces, or undefined for a name that is not a segment. */
export const parseSegmentFileName = (name: string): number | undefined => {
  const match = /^wal-(\d{20})\.log$/.exec(name)
  return match ? Number(match[1]) : undefined
}

/** Encodes a segment header. */
export const encodeSegmentHeader = (salt: number, firstSeq: number): Uint8Array => {
  const bytes = Buffer.alloc(segmentHeaderBytes)
  bytes.write(segmentMagic, 0, "latin1")
  bytes.writeUInt32LE(salt >>> 0, 8)
  bytes.writeBigUInt64LE(BigInt(firstSeq), 12)
  bytes.writeUInt32LE(crc32c(bytes.subarray(0, 20)), 20)
  return bytes
}

/** Decodes a segment header; undefined when it is short, torn or not a mnemos segment. */
export const decodeSegmentHeader = (
  bytes: Uint8Array,
): { readonly salt: number; readonly firstSeq: number } | undefined => {
  if (bytes.length < segmentHeaderBytes) return undefined
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, segmentHeaderBytes)
  if (buffer.toString("latin1", 0, 8) !== segmentMagic) return undefined
  if (buffer.readUInt32LE(20) !== crc32c(buffer.subarray(0, 20))) return undefined
  return { salt: buffer.readUInt32LE(8), firstSeq: Number(buffer.readBigUInt64LE(12)) }
}

/** The encoded size of a payload; a string is written as UTF-8. */
export const payloadLength = (payload: Uint8Array | string): number =>
  typeof payload === "string" ? Buffer.byteLength(payload, "utf8") : payload.length

/**
 * Appends the encoding of one record to `out` at `offset`; returns the offset after it. A string
 * payload is UTF-8 encoded straight into `out`, which must have room for it.
 */
export const encodeRecordInto = (
  out: Buffer,
  offset: number,
  record: {
    readonly seq: number
    readonly salt: number
    readonly type: number
    readonly flags: number
    readonly payload: Uint8Array | string
  },
): number => {
  const { payload } = record
  const payloadStart = offset + recordHeaderBytes
  let end: number
  if (typeof payload === "string") end = payloadStart + out.write(payload, payloadStart, "utf8")
  else {
    out.set(payload, payloadStart)
    end = payloadStart + payload.length
  }
  out.writeUInt32LE(end - payloadStart, offset)
  // The u64 as two u32 halves: the same bytes as writeBigUInt64LE, without a BigInt per record.
  out.writeUInt32LE(record.seq % 2 ** 32, offset + 8)
  out.writeUInt32LE(Math.floor(record.seq / 2 ** 32), offset + 12)
  out.writeUInt32LE(record.salt >>> 0, offset + 16)
  out.writeUInt8(record.type, offset + 20)
  out.writeUInt8(record.flags, offset + 21)
  out.writeUInt16LE(0, offset + 22)
  out.writeUInt32LE(crc32c(out.subarray(offset + 8, end)), offset + 4)
  return end
}

/** The result of reading one record at an offset. */
/**
 * Encodes `entries` as one batch: sequences from `firstSeq`, the start flag on the first record and
 * the end flag on the last. `byteCount` is the batch's size (headers and payloads); every log
 * writes its batches with this, so a batch reads back the same from a file or a stream.
 */
export const encodeBatch = (
  entries: ReadonlyArray<{ readonly type: number; readonly payload: Uint8Array | string }>,
  firstSeq: number,
  salt: number,
  byteCount: number,
): Buffer => {
  const buffer = Buffer.allocUnsafe(byteCount)
  let end = 0
  for (let index = 0; index < entries.length; index++) {
    const entry = entries[index]!
    const flags = (index === entries.length - 1 ? batchEndFlag : 0) | (index === 0 ? batchStartFlag : 0)
    end = encodeRecordInto(buffer, end, {
      seq: firstSeq + index,
      salt,
      type: entry.type,
      flags,
      payload: entry.payload,
    })
  }
  return buffer.subarray(0, end)
}

export type RecordRead =
  | { readonly _tag: "Record"; readonly record: WalRecord; readonly salt: number; readonly end: number }
  | { readonly _tag: "Short" }
  | { readonly _tag: "Bad"; readonly why: string }

/** Reads the record at `offset` of a segment's bytes, checking length bounds and checksum. */
export const readRecordAt = (bytes: Buffer, offset: number): RecordRead => {
  if (bytes.length - offset < recordHeaderBytes) return { _tag: "Short" }
  const length = bytes.readUInt32LE(offset)
  if (length > recordPayloadBytesMax) return { _tag: "Bad", why: `payload length ${length} exceeds the maximum` }
  const end = offset + recordHeaderBytes + length
  if (end > bytes.length) return { _tag: "Short" }
  if (bytes.readUInt32LE(offset + 4) !== crc32c(bytes.subarray(offset + 8, end))) {
    return { _tag: "Bad", why: "checksum mismatch" }
  }
  return {
    _tag: "Record",
    salt: bytes.readUInt32LE(offset + 16),
    end,
    record: {
      seq: Number(bytes.readBigUInt64LE(offset + 8)),
      type: bytes.readUInt8(offset + 20),
      flags: bytes.readUInt8(offset + 21),
      payload: bytes.subarray(offset + recordHeaderBytes, end),
    },
  }
}
