/**
 * Typed arrays cut from shared chunks, as Node's `Buffer.allocUnsafe` cuts its pool.
 *
 * V8 gives a typed array of more than 64 bytes a backing store of its own outside its heap: a
 * zeroed allocation from the C library, an entry V8 tracks and counts towards its collections, and
 * a free that its helper thread sweeps afterwards. The search thread made two such arrays for every
 * document it indexed (its embedding, 400 bytes, and that embedding's compact form, 100), and
 * their making and sweeping was 5 % of a sequential write's CPU (docs/benchmarks.md, "A
 * document's arrays cut from chunks"); cut from chunks, one array in forty or more has a store of
 * its own.
 *
 * A slice is zeroed, as a new array is (each part of a chunk is handed out once), and keeps its
 * whole chunk alive: only for arrays that are copied somewhere and dropped, never for one that is
 * kept, and never for one posted to another thread (structured clone copies a view's whole buffer,
 * and transferring it would detach the chunk under every other slice).
 */

/** Hands out zeroed arrays of up to a quarter of `chunkLength` from chunks made by `make`; longer ones are made alone. */
export const arraySlices = <A extends Int8Array | Float32Array>(
  make: (length: number) => A,
  chunkLength: number,
): ((length: number) => A) => {
  let chunk = make(0)
  let used = 0
  return (length) => {
    if (length > chunkLength / 4) return make(length)
    if (used + length > chunk.length) {
      chunk = make(chunkLength)
      used = 0
    }
    const slice = chunk.subarray(used, used + length) as A
    used += length
    return slice
  }
}

/** Whether `array` is a slice of a larger buffer (so not to be transferred to another thread as it is). */
export const sharesItsBuffer = (array: ArrayBufferView): boolean =>
  array.byteOffset !== 0 || array.byteLength !== array.buffer.byteLength
