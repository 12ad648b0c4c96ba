/**
 * The WAL's checksum is CRC-32C (Castagnoli), as the logs already on users' disks were written
 * with: the check value and the test vectors of RFC 3720 (iSCSI), B.4.
 */
import { assert, describe, it } from "vitest"
import { crc32c } from "../../src/stores/wal/Crc32c.ts"

describe("CRC-32C", () => {
  it("gives the standard check value and RFC 3720's test vectors, unsigned", () => {
    assert.strictEqual(crc32c(Buffer.from("123456789")), 0xe3069283)
    assert.strictEqual(crc32c(new Uint8Array(32)), 0x8a9136aa)
    assert.strictEqual(crc32c(new Uint8Array(32).fill(0xff)), 0x62a8ab43)
    assert.strictEqual(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i)), 0x46dd794e)
    assert.strictEqual(crc32c(Uint8Array.from({ length: 32 }, (_, i) => 31 - i)), 0x113fdb5c)
    assert.strictEqual(crc32c(new Uint8Array(0)), 0)
  })

  it("reads a view at its own offset", () => {
    const bytes = Buffer.from("xx123456789yy")
    assert.strictEqual(crc32c(bytes.subarray(2, 11)), 0xe3069283)
    assert.strictEqual(crc32c(new Uint8Array(bytes.buffer, bytes.byteOffset + 2, 9)), 0xe3069283)
  })
})
