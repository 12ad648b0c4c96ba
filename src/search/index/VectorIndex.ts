/**
 * Nearest neighbours of unit-length vectors, by cosine (= dot product).
 *
 * Vectors live in a slab indexed by document number, in their compact form (CompactVector.ts: a
 * signed byte a dimension and a float32 peak per vector, about a quarter of float32's bytes), the
 * form search's LMDB stores too. Up to `exactVectorsMax` vectors, a query is an exact scan in
 * JavaScript over the codes (a few milliseconds at most, and the same arithmetic as the reference
 * scan in the tests). Above it, usearch's SIMD exact search over the codes (cosine, which the
 * per-vector peaks do not change) finds the candidates (about 5 ms a query per 100,000 100-d
 * vectors on one core). Only from
 * `annVectorsMin` on is an HNSW index (usearch, its copy of the vectors in half precision) built,
 * in the background; it is not persisted, so below that size it would cost every start a minute
 * or more of CPU (about 80 s for the 220,000 documents of the footprint benchmark's 100,000
 * records, on a 2-core EPYC) to save a few milliseconds a query. Either way each candidate's
 * similarity is computed again from the slab, as the exact scan computes it.
 * Filters are applied to an oversampled candidate list; when too few candidates survive a
 * selective filter, the filtered documents are scanned exactly instead.
 */
import { createRequire } from "node:module"
import type { MetricKind, ScalarKind } from "usearch"
import {
  type CompactVector,
  compactDot,
  compactVector,
  compactVectorBytes,
  expandVector,
  vectorCodeMax,
} from "./CompactVector.ts"
import { TopK } from "./TopK.ts"

type Usearch = typeof import("usearch")
let usearchModule: Usearch | undefined
/**
 * usearch, loaded when a collection first passes `exactVectorsMax` (its native addon is not worth
 * loading at startup for the exact scans below it). Through require: its ESM entry cannot find
 * its native addon (it recurses looking for the build directory); the CommonJS entry can.
 */
const usearch = (): Usearch => {
  usearchModule ??= createRequire(import.meta.url)("usearch") as Usearch
  return usearchModule
}

/** Below this many vectors, queries scan exactly. */
export const exactVectorsMax = 10_000
/** From this many vectors on, an HNSW index is built (below it, usearch's exact search answers). */
export const annVectorsMin = 400_000
/** HNSW parameters: graph degree and beam widths (recall ≈ 0.99 on 100-d text vectors). */
export const annConnectivity = 16
export const annExpansionAdd = 64
export const annExpansionSearch = 96
/**
 * Vectors added to the HNSW index per native call while it catches up. The call holds the event
 * loop (usearch's add is synchronous), so chunks stay small: at 0.1-0.5 ms a vector, 32 of them hold
 * it for a few milliseconds, never the hundreds of milliseconds a chunk of 2,000 did.
 */
export const annBuildChunkVectors = 32
/** Longest a background step keeps adding chunks before the event loop gets a turn. */
export const annBuildSliceMs = 4

/** A semantic hit: document number and cosine similarity. */
export interface VectorHit {
  readonly num: number
  readonly similarity: number
}

/** The vectors of every document that has one. */
export class VectorIndex {
  /** `annVectorsMin`: when an HNSW index is worth building (tests lower it). */
  private readonly annMin: number

  constructor(annMin: number = annVectorsMin) {
    this.annMin = annMin
  }

  /** `dimensions` codes per document number (CompactVector.ts), zero where there is no vector. */
  private codes: Int8Array = new Int8Array(0)
  /** The peak of each document number's codes (0 where there is no vector). */
  private peaks: Float32Array = new Float32Array(0)
  private present: Uint8Array = new Uint8Array(0)
  /** Set by the first vector (0 until then): the model decides it. */
  dimensions = 0
  private ann: InstanceType<Usearch["Index"]> | undefined
  /** Documents whose vector is not yet in `ann` (added, or changed since). */
  private readonly annBacklog = new Set<number>()
  private count = 0
  private highest = -1

  /** Vectors held. */
  get size(): number {
    return this.count
  }

  /** True when the HNSW index answers (it exists and has caught up). */
  get annReady(): boolean {
    return this.ann !== undefined && this.annBacklog.size === 0
  }

  /** Vectors waiting to enter the HNSW index. */
  get annBacklogSize(): number {
    return this.annBacklog.size
  }

  /** `buildAnnStep` has work: vectors wait, or the collection has grown to need the index. */
  get annBehind(): boolean {
    return this.annBacklog.size > 0 || (this.ann === undefined && this.count >= this.annMin)
  }

  has(num: number): boolean {
    return this.present[num] === 1
  }

  /** Bytes the slab holds in memory (its capacity, not only the vectors present). */
  get bytes(): number {
    return this.present.length * (compactVectorBytes(this.dimensions) + Uint8Array.BYTES_PER_ELEMENT)
  }

  /** The vector of `num` as float32 (a copy; each component within half a code of what was set). */
  get(num: number): Float32Array | undefined {
    const stored = this.getCompact(num)
    return stored === undefined ? undefined : expandVector(stored.codes, stored.peak)
  }

  /** The stored form of `num`'s vector (a copy): `set` it again and nothing is lost. */
  getCompact(num: number): CompactVector | undefined {
    if (!this.has(num)) return undefined
    return { codes: this.codes.slice(num * this.dimensions, (num + 1) * this.dimensions), peak: this.peaks[num]! }
  }

  private grow(num: number) {
    if (num < this.present.length) return
    let capacity = Math.max(1024, this.present.length)
    while (capacity <= num) capacity *= 2
    const codes = new Int8Array(capacity * this.dimensions)
    codes.set(this.codes)
    const peaks = new Float32Array(capacity)
    peaks.set(this.peaks)
    const present = new Uint8Array(capacity)
    present.set(this.present)
    this.codes = codes
    this.peaks = peaks
    this.present = present
  }

  /** Sets (or replaces) the vector of `num`: a float32 one is compacted, a compact one kept as it is. */
  set(num: number, vector: Float32Array | CompactVector): void {
    const compact = vector instanceof Float32Array ? compactVector(vector) : vector
    if (this.dimensions === 0) this.dimensions = compact.codes.length
    if (compact.codes.length !== this.dimensions)
      throw new Error(`vector of ${compact.codes.length} dims, expected ${this.dimensions}`)
    this.grow(num)
    if (!this.has(num)) this.count++
    this.present[num] = 1
    this.codes.set(compact.codes, num * this.dimensions)
    this.peaks[num] = compact.peak
    this.highest = Math.max(this.highest, num)
    if (this.ann !== undefined || this.count >= this.annMin) this.annBacklog.add(num)
  }

  /** Removes the vector of `num`. */
  remove(num: number): void {
    if (!this.has(num)) return
    this.present[num] = 0
    this.codes.fill(0, num * this.dimensions, (num + 1) * this.dimensions)
    this.peaks[num] = 0
    this.count--
    this.annBacklog.delete(num)
    if (this.ann?.contains(BigInt(num))) this.ann.remove(BigInt(num))
  }

  /**
   * Moves vectors into the HNSW index, chunk by chunk for up to `annBuildSliceMs` (creating it once
   * the collection reaches `annVectorsMin`); returns how many are still waiting. Until none wait,
   * searches use usearch's exact search, so a backlog costs search time, never results.
   */
  buildAnnStep(): number {
    const started = performance.now()
    let waiting = this.addAnnChunk()
    while (waiting > 0 && performance.now() - started < annBuildSliceMs) waiting = this.addAnnChunk()
    return waiting
  }

  /** Moves up to `annBuildChunkVectors` vectors into the HNSW index; returns how many still wait. */
  private addAnnChunk(): number {
    if (this.ann === undefined) {
      if (this.count < this.annMin) return 0
      this.ann = new (usearch().Index)({
        dimensions: this.dimensions,
        metric: "ip" as MetricKind,
        // Half precision: the HNSW graph finds candidates, whose similarity is then computed
        // from the slab, so the index's own copy of every vector costs 2 bytes a dimension.
        quantization: "f16" as ScalarKind,
        connectivity: annConnectivity,
        expansion_add: annExpansionAdd,
        expansion_search: annExpansionSearch,
        multi: false,
      })
      for (let num = 0; num <= this.highest; num++) if (this.has(num)) this.annBacklog.add(num)
    }
    // One native call per chunk: usearch inserts a batch on its own threads, where one call per
    // vector pays the call (and thread hand-off) each time.
    const chunk: Array<number> = []
    for (const num of this.annBacklog) {
      if (chunk.length >= annBuildChunkVectors) break
      chunk.push(num)
    }
    if (chunk.length === 0) return 0
    const keys = new BigUint64Array(chunk.length)
    const vectors = new Float32Array(chunk.length * this.dimensions)
    chunk.forEach((num, index) => {
      this.annBacklog.delete(num)
      const key = BigInt(num)
      if (this.ann!.contains(key)) this.ann!.remove(key)
      keys[index] = key
      const d = this.dimensions
      const peak = this.peaks[num]!
      for (let i = 0; i < d; i++) vectors[index * d + i] = (this.codes[num * d + i]! * peak) / vectorCodeMax
    })
    this.ann.add(keys, vectors)
    return this.annBacklog.size
  }

  /** Exact scan over the documents `accept` lets through, keeping the best `limit`. */
  private scan(
    query: Float32Array,
    accept: (num: number) => boolean,
    limit: number,
    minSimilarity: number,
    better: (a: VectorHit, b: VectorHit) => boolean,
  ) {
    const best = new TopK<VectorHit>(limit, better)
    const codes = this.codes
    const peaks = this.peaks
    const present = this.present
    const d = this.dimensions
    const highest = this.highest
    // Only candidates above the worst kept similarity can enter: most are rejected by one compare.
    let floor = minSimilarity
    let kept = 0
    for (let num = 0; num <= highest; num++) {
      if (present[num] !== 1) continue
      // compactDot, inlined: this loop is the whole cost of a scan.
      let sum = 0
      const offset = num * d
      for (let i = 0; i < d; i++) sum += codes[offset + i]! * query[i]!
      const similarity = (sum * peaks[num]!) / vectorCodeMax
      if (similarity < floor || !accept(num)) continue
      best.push({ num, similarity })
      if (++kept >= limit) floor = Math.max(floor, best.worst()!.similarity)
    }
    return best.sorted()
  }

  /**
   * The `limit` most similar documents that `accept` lets through, with similarity at least
   * `minSimilarity`; ties go to the smaller `tieBreak`.
   */
  search(
    query: Float32Array,
    accept: (num: number) => boolean,
    limit: number,
    minSimilarity: number,
    tieBreak: (a: number, b: number) => number,
  ): Array<VectorHit> {
    const order = (a: VectorHit, b: VectorHit) => b.similarity - a.similarity || tieBreak(a.num, b.num)
    const better = (a: VectorHit, b: VectorHit) => order(a, b) < 0
    if (this.count === 0 || limit <= 0 || query.length !== this.dimensions) return []
    if (this.count > exactVectorsMax) {
      const wanted = Math.min(this.highest + 1, limit * 2 + 32)
      const matches = this.annReady
        ? this.ann!.search(query, wanted, 1)
        : // Cosine of the codes: each vector's peak drops out, so the query is compacted too. Its
          // codes are copied out of their chunk (ArraySlices.ts): usearch's exact search reads a
          // query from the start of its buffer, whatever the view's offset (usearch 2.26.2; its
          // HNSW search reads the view).
          (usearch().exactSearch(
            this.codes.subarray(0, (this.highest + 1) * this.dimensions),
            compactVector(query).codes.slice(),
            this.dimensions,
            wanted,
            "cos" as MetricKind,
            1,
          ) as InstanceType<Usearch["Matches"]>)
      const hits: Array<VectorHit> = []
      let underThreshold = false
      for (let i = 0; i < matches.keys.length; i++) {
        const num = Number(matches.keys[i]!)
        if (this.present[num] !== 1) continue
        const similarity = compactDot(this.codes, num * this.dimensions, this.peaks[num]!, query)
        if (similarity < minSimilarity) underThreshold = true
        else if (accept(num)) hits.push({ num, similarity })
      }
      // Enough survivors, or the list already reached the threshold: the answer is complete.
      if (hits.length >= limit || underThreshold || matches.keys.length < wanted)
        return hits.sort(order).slice(0, limit)
    }
    return this.scan(query, accept, limit, minSimilarity, better)
  }
}
