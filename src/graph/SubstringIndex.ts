/**
 * A substring index behind search_nodes whose answers equal a linear scan.
 *
 * The official rule is `text.toLowerCase().includes(query.toLowerCase())` over an entity's
 * texts (name, type, each observation). `includes` compares UTF-16 code units, so a query can
 * match half of a surrogate pair ("\uD83D" is found in "😀"); the index therefore works on the
 * code units of the lower-cased texts, never on code points. Lower-casing is done per text and
 * per query exactly as the official code does it (never on a concatenation, which could change
 * context-dependent mappings such as Greek final sigma), and lengths may change ("İ" becomes
 * two units); all grams come from the lower-cased strings.
 *
 * Each document is posted to three kinds of posting list, none spanning two of its texts:
 *
 * - unit lists: one per code unit it contains;
 * - trigram lists: one per three adjacent units; the last pair of each text gets a virtual
 *   end-of-text third unit, so every adjacent pair starts some trigram;
 * - word lists: one per whitespace/punctuation-separated word of 4 to 64 units.
 *
 * A query of one unit is answered by its unit list, of two units by the union of the trigram
 * lists starting with that pair, of three by its trigram list: these are exact. A longer query
 * can only occur in a document having all its trigrams, so intersecting those lists gives a
 * superset, and each candidate is verified with `includes`; a document whose word list is the
 * query itself provably contains it and skips verification. Postings only ever prove or
 * suggest; a document that lost grams in an update is marked stale and always verified, so
 * correctness never depends on stale postings.
 *
 * Documents occupy slots in insertion order; replacing a document's texts keeps its slot, so
 * results come back in first-insertion order, which is the official graph order. Removals and
 * shrinking updates leave stale postings; when they outnumber live ones the index rebuilds
 * itself, so that cost is amortised O(1) per posting. Posting lists live in a pool of
 * fixed-size byte pages as chains of blocks, avoiding one JS object per list (Lucene's
 * `ByteBlockPool` is laid out the same way): the pool grows a page at a time, so it is never copied
 * and holds at most one page it does not use. One array doubled on growth held up to twice its
 * postings, and three times while it was copied: 130 MiB for the 91 MB of postings of 100,000
 * entities, 64 + 128 MiB at once as it last grew. A list holds each slot as its distance from the
 * one before, in a variable-length integer (LEB128: 7 bits a byte), as Lucene's postings do: slots
 * are appended mostly in ascending order, so most distances take one byte, against four for a
 * 32-bit slot (12.5 MiB for the 10k graph workload's 2.26 million postings in 32-bit blocks).
 */

/** Largest posting block, in bytes; a list's next block holds half its bytes so far, up to this. */
const postingBlockBytesMax = 8192
/** Smallest posting block, in bytes: room for one slot of up to 21 bits (three bytes). */
const postingBlockBytesMin = 4
/** A pool page's size is 2 to this power, in bytes (64 KiB: below glibc's mmap threshold); a block never spans two pages. */
const pageBytesLog2 = 16
const pageBytes = 1 << pageBytesLog2
const pageByteMask = pageBytes - 1
/** Default: rebuild when stale postings exceed both this and the number of live postings. */
const stalePostingsBeforeRebuildMinDefault = 1 << 16
/** Default: rebuild when dead slots exceed both this and the number of live slots. */
const deadSlotsBeforeRebuildMinDefault = 1 << 12
/** Default: stop intersecting once this few candidates remain; verifying them is cheaper. */
const candidatesWorthIntersectingDefault = 32
/** Default: verifying one candidate costs about this many times marking one posting. */
const verifyToMarkCostRatioDefault = 20
/** Restore result order by a slot scan instead of a sort when matches exceed slots / this. */
const slotScanOrderDivisor = 16
/** Stamp generations run up to this, then all marks are cleared and counting restarts. */
const stampGenerationsMaxDefault = 0xffff_fffe
/** A long query intersects at most this many of its trigram lists (the shortest); fewer still give a superset. */
const trigramListsPerQueryMax = 64
/** The fewest stamp generations allowed before a wrap: a query can need `2 × lists + 4`. */
const stampGenerationsPerQueryMin = 2 * trigramListsPerQueryMax + 4
/** Words shorter than this are not posted: queries of up to 3 units are answered exactly anyway. */
const wordUnitsMin = 4
/** Words longer than this are not posted (long tokens such as URLs are rarely queried whole). */
const wordUnitsMax = 64
/**
 * What separates words: ASCII whitespace and punctuation, and the rest of JavaScript's white space
 * (`\s`): the regular expression `/[\s!-/:-@[-`{-~]+/`, read a unit at a time (`isWordSeparator`).
 */
const asciiWordSeparators = (() => {
  const separators = new Uint8Array(0x80)
  for (const [from, to] of [
    [0x09, 0x0d],
    [0x20, 0x2f],
    [0x3a, 0x40],
    [0x5b, 0x60],
    [0x7b, 0x7e],
  ] as const)
    separators.fill(1, from, to + 1)
  return separators
})()
export const isWordSeparator = (unit: number): boolean =>
  unit < 0x80
    ? asciiWordSeparators[unit] === 1
    : unit === 0xa0 ||
      unit === 0x1680 ||
      (unit >= 0x2000 && unit <= 0x200a) ||
      unit === 0x2028 ||
      unit === 0x2029 ||
      unit === 0x202f ||
      unit === 0x205f ||
      unit === 0x3000 ||
      unit === 0xfeff
/** Separator between a document's lower-cased texts in its joined form. */
const textSeparator = "\u0000"
/** Stands for "end of text" as the third unit of a trigram, so every unit pair starts a trigram. */
const textEnd = 0x1_0000

/**
 * Block layout in the pool: [next block: 4 bytes][used: 2 bytes][entries]. A block is named by its
 * first byte's place, `page << pageBytesLog2 | byte within the page`; 0 (the first page's first
 * byte, never used) means none. Its room is known only while it is its list's last block
 * (`fieldTailCapacity`): the others are never written again.
 */
const blockHeaderBytes = 6

/** A list's numbers in `PostingPool`'s table: its first and last blocks, its entries, its last entry, */
const fieldHead = 0
const fieldTail = 1
const fieldLength = 2
/** (the base of the next distance) */
const fieldLast = 3
/** the bytes its blocks take (for the size of its next block), and the bytes used and room in its last block. */
const fieldBytes = 4
const fieldTailUsed = 5
const fieldTailCapacity = 6
const listFields = 8

/**
 * Lists of slot numbers, appended to and read whole, never edited in place. An entry is the slot's
 * distance from the list's previous entry (from -1 for its first), LEB128-encoded (never starting
 * with a zero byte, as the distance is at least 1); a slot not above the previous one (a document
 * updated into a list it had left) is written as a zero byte and the slot itself.
 */
export class PostingPool {
  private pages: Array<Uint8Array<ArrayBuffer>> = [new Uint8Array(pageBytes)]
  /** Bytes used in the last page. */
  private pageBytesUsed = 1
  /**
   * Each list's state, `listFields` numbers a list side by side (`field*` below), so an append
   * reads one cache line, not one per field: arrays of one field each cost a third of a bulk build.
   */
  private lists = new Uint32Array(256 * listFields)
  private listsUsed = 0
  /** What `entriesOf` decodes into, grown to the longest list read. */
  private decoded = new Uint32Array(1024)
  /** Entries appended since construction, stale or not. */
  entries = 0

  get listCount(): number {
    return this.listsUsed
  }

  get bytes(): number {
    return this.pages.length * pageBytes + 4 * this.lists.length + 4 * this.decoded.length
  }

  newList(): number {
    if ((this.listsUsed + 1) * listFields > this.lists.length) this.lists = grow(this.lists, this.lists.length * 2)
    return this.listsUsed++
  }

  length(list: number): number {
    return this.lists[list * listFields + fieldLength]!
  }

  append(list: number, value: number): void {
    const fields = this.lists
    const at0 = list * listFields
    const previous = fields[at0 + fieldLength] === 0 ? -1 : fields[at0 + fieldLast]!
    const distance = distanceOf(previous, value)
    const size = distance === 0 ? 1 + varintBytes(value) : varintBytes(distance)
    let tail = fields[at0 + fieldTail]!
    let used = fields[at0 + fieldTailUsed]!
    if (tail === 0 || used + size > fields[at0 + fieldTailCapacity]!) {
      const capacity = Math.max(
        size,
        Math.min(postingBlockBytesMax, Math.max(postingBlockBytesMin, fields[at0 + fieldBytes]! >>> 1)),
      )
      const block = this.allocate(blockHeaderBytes + capacity)
      if (tail === 0) fields[at0 + fieldHead] = block
      else setBlockNext(this.pages[tail >>> pageBytesLog2]!, tail & pageByteMask, block)
      fields[at0 + fieldTail] = block
      fields[at0 + fieldTailCapacity] = capacity
      fields[at0 + fieldBytes] += blockHeaderBytes + capacity
      tail = block
      used = 0
    }
    const page = this.pages[tail >>> pageBytesLog2]!
    const at = tail & pageByteMask
    let write = at + blockHeaderBytes + used
    if (distance !== 0 && distance < 0x80) page[write++] = distance
    else {
      if (distance === 0) page[write++] = 0
      // Divided, not shifted: the first entry's distance can be 2^32 (slot 2^32 - 1 from -1).
      for (let rest = distance === 0 ? value : distance; ; rest = Math.floor(rest / 0x80)) {
        if (rest < 0x80) {
          page[write++] = rest
          break
        }
        page[write++] = (rest & 0x7f) | 0x80
      }
    }
    used = write - at - blockHeaderBytes
    fields[at0 + fieldTailUsed] = used
    setBlockUsed(page, at, used)
    fields[at0 + fieldLast] = value
    fields[at0 + fieldLength]!++
    this.entries++
  }

  /**
   * The entries of `list` in append order. A view into one array the pool reuses: valid until the
   * next call (every reader here is done with a list before it reads another).
   */
  entriesOf(list: number): Uint32Array {
    const length = this.lists[list * listFields + fieldLength]!
    if (length > this.decoded.length) this.decoded = new Uint32Array(Math.max(length, this.decoded.length * 2))
    const out = this.decoded
    const pages = this.pages
    let filled = 0
    let value = -1
    for (let block = this.lists[list * listFields + fieldHead]!; block !== 0; ) {
      const page = pages[block >>> pageBytesLog2]!
      const at = block & pageByteMask
      let read = at + blockHeaderBytes
      const end = read + blockUsed(page, at)
      while (read < end) {
        let byte = page[read++]!
        const escaped = byte === 0
        if (escaped) byte = page[read++]!
        let delta = byte & 0x7f
        for (let shift = 7; byte >= 0x80; shift += 7) {
          byte = page[read++]!
          delta += (byte & 0x7f) * 2 ** shift
        }
        value = escaped ? delta : value + delta
        out[filled++] = value
      }
      block = blockNext(page, at)
    }
    return out.subarray(0, filled)
  }

  /**
   * A pool holding the same lists, each in blocks filled to the last entry (as few as
   * `postingBlockBytesMax` allows): what a bulk build leaves once its lists stop growing. Lists
   * grown an entry at a time hold about a third more than their entries (a block's room to grow,
   * and its header). The entries' bytes are copied as they are (an entry is a distance from the one
   * before it, wherever it lies), cut between entries where a block is full.
   */
  compacted(): PostingPool {
    const copy = new PostingPool()
    // The table too without its room to grow (up to half of it, as it doubles).
    copy.lists = new Uint32Array(Math.max(1, this.listsUsed) * listFields)
    copy.listsUsed = this.listsUsed
    copy.entries = this.entries
    for (let list = 0; list < this.listsUsed; list++) {
      const from = list * listFields
      let bytes = 0
      for (let block = this.lists[from + fieldHead]!; block !== 0; ) {
        const page = this.pages[block >>> pageBytesLog2]!
        bytes += blockUsed(page, block & pageByteMask)
        block = blockNext(page, block & pageByteMask)
      }
      copy.lists[from + fieldLength] = this.lists[from + fieldLength]!
      copy.lists[from + fieldLast] = this.lists[from + fieldLast]!
      let target = 0
      let targetPage = copy.pages[0]!
      let targetAt = 0
      let left = 0
      for (let block = this.lists[from + fieldHead]!; block !== 0; ) {
        const page = this.pages[block >>> pageBytesLog2]!
        const at = block & pageByteMask
        let read = at + blockHeaderBytes
        const end = read + blockUsed(page, at)
        if (target !== 0 && end - read <= left) {
          // The whole block fits: its bytes at once.
          const used = copy.lists[from + fieldTailUsed]!
          targetPage.set(page.subarray(read, end), targetAt + blockHeaderBytes + used)
          copy.lists[from + fieldTailUsed] = used + end - read
          setBlockUsed(targetPage, targetAt, used + end - read)
          left -= end - read
          bytes -= end - read
          read = end
        }
        while (read < end) {
          let entryEnd = page[read] === 0 ? read + 1 : read
          while (page[entryEnd]! >= 0x80) entryEnd++
          entryEnd++
          const size = entryEnd - read
          if (target === 0 || size > left) {
            const capacity = Math.max(size, Math.min(postingBlockBytesMax, bytes))
            const next = copy.allocate(blockHeaderBytes + capacity)
            const nextPage = copy.pages[next >>> pageBytesLog2]!
            if (target === 0) copy.lists[from + fieldHead] = next
            else setBlockNext(targetPage, targetAt, next)
            copy.lists[from + fieldBytes] += blockHeaderBytes + capacity
            copy.lists[from + fieldTail] = next
            copy.lists[from + fieldTailCapacity] = capacity
            copy.lists[from + fieldTailUsed] = 0
            target = next
            targetPage = nextPage
            targetAt = next & pageByteMask
            left = capacity
          }
          const used = copy.lists[from + fieldTailUsed]!
          for (let write = targetAt + blockHeaderBytes + used; read < entryEnd; ) targetPage[write++] = page[read++]!
          copy.lists[from + fieldTailUsed] = used + size
          setBlockUsed(targetPage, targetAt, used + size)
          left -= size
          bytes -= size
        }
        block = blockNext(page, at)
      }
    }
    return copy
  }

  /** A block of `byteCount` bytes (at most a page), in the last page or, if it has no room, a new one. */
  private allocate(byteCount: number): number {
    if (this.pageBytesUsed + byteCount > pageBytes) {
      this.pages.push(new Uint8Array(pageBytes))
      this.pageBytesUsed = 0
    }
    const block = (((this.pages.length - 1) << pageBytesLog2) | this.pageBytesUsed) >>> 0
    this.pageBytesUsed += byteCount
    return block
  }
}

/** Bytes of `value`'s LEB128 encoding (up to 2^35). */
const varintBytes = (value: number): number =>
  value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x20_0000 ? 3 : value < 0x1000_0000 ? 4 : 5

/** The distance `value` is written as after `previous` (-1 before a list's first): 0 when written as an escaped slot. */
const distanceOf = (previous: number, value: number): number => (value > previous ? value - previous : 0)

const blockNext = (page: Uint8Array, at: number): number =>
  (page[at]! | (page[at + 1]! << 8) | (page[at + 2]! << 16) | (page[at + 3]! << 24)) >>> 0
const setBlockNext = (page: Uint8Array, at: number, next: number): void => {
  page[at] = next & 0xff
  page[at + 1] = (next >>> 8) & 0xff
  page[at + 2] = (next >>> 16) & 0xff
  page[at + 3] = next >>> 24
}
const blockUsed = (page: Uint8Array, at: number): number => page[at + 4]! | (page[at + 5]! << 8)
const setBlockUsed = (page: Uint8Array, at: number, used: number): void => {
  page[at + 4] = used & 0xff
  page[at + 5] = used >>> 8
}

const grow = (array: Uint32Array<ArrayBuffer>, capacity: number): Uint32Array<ArrayBuffer> => {
  const grown = new Uint32Array(capacity)
  grown.set(array)
  return grown
}
const grow32 = (array: Int32Array<ArrayBuffer>, capacity: number): Int32Array<ArrayBuffer> => {
  const grown = new Int32Array(capacity)
  grown.set(array)
  return grown
}

/** A reusable mark per number (slot or list), cleared in O(1) by moving to a new stamp. */
class StampSet {
  /** The mark of each number; a number is marked in generation g when `values[n] === g`. */
  values = new Uint32Array(1024)
  private current = 0

  constructor(private readonly generationsMax: number) {}

  /**
   * Makes sure `count` more generations can start without wrapping, clearing all marks now if
   * not; call it before a computation that keeps marks of several generations alive.
   */
  reserve(count: number): void {
    if (this.current + count > this.generationsMax) {
      this.values.fill(0)
      this.current = 0
    }
  }

  /** Starts a new generation; every number is unmarked in it. Returns the generation. */
  next(): number {
    this.reserve(1)
    return ++this.current
  }

  ensure(size: number): void {
    if (size > this.values.length) this.values = grow(this.values, Math.max(size, this.values.length * 2))
  }
}

/** The second half of a unit's key in `GramLists` (a trigram's is its third unit, 0 to `textEnd`). */
const unitGram = -1

/**
 * Gram → posting list, for the hot loop of indexing (a lookup per unit and per trigram of every
 * text): an open-addressing table (linear probing, at most half full) over a key in two 32-bit
 * halves, a unit's (unit, `unitGram`) or a trigram's (its first pair, its third unit). Two nested
 * `Map`s per trigram took a third of a bulk build's time.
 */
class GramLists {
  private firsts = new Int32Array(1024)
  private seconds = new Int32Array(1024)
  /** The list of each entry, -1 where the entry is free. */
  private lists = new Int32Array(1024).fill(-1)
  /** A gram's first place is the top bits of its hash: 32 less log2 of the capacity. */
  private shift = 32 - 10
  private used = 0

  /** The list of the gram, or -1. */
  get(first: number, second: number): number {
    const mask = this.lists.length - 1
    for (let at = hashOfGram(first, second) >>> this.shift; ; at = (at + 1) & mask) {
      const list = this.lists[at]!
      if (list === -1 || (this.firsts[at] === first && this.seconds[at] === second)) return list
    }
  }

  /** Records the list of a gram it does not hold. */
  add(first: number, second: number, list: number): void {
    if (2 * (this.used + 1) > this.lists.length) this.resize(this.lists.length * 2)
    this.put(first, second, list)
    this.used++
  }

  private put(first: number, second: number, list: number): void {
    const mask = this.lists.length - 1
    let at = hashOfGram(first, second) >>> this.shift
    while (this.lists[at] !== -1) at = (at + 1) & mask
    this.firsts[at] = first
    this.seconds[at] = second
    this.lists[at] = list
  }

  private resize(capacity: number): void {
    const { firsts, seconds, lists } = this
    this.firsts = new Int32Array(capacity)
    this.seconds = new Int32Array(capacity)
    this.lists = new Int32Array(capacity).fill(-1)
    this.shift--
    for (let at = 0; at < lists.length; at++) if (lists[at] !== -1) this.put(firsts[at]!, seconds[at]!, lists[at]!)
  }
}

/** A gram's hash in `GramLists` (multiplicative, of both halves; its top bits are used). */
const hashOfGram = (first: number, second: number): number => {
  const mixed = Math.imul(first, 0x9e37_79b1) ^ second
  return Math.imul(mixed ^ (mixed >>> 15), 0x85eb_ca6b) >>> 0
}

/** A word's two hashes (`WordLists`) start from these, and take each unit in with these multipliers. */
const wordHashSeeds = [0x811c_9dc5 | 0, 0x9747_b28c | 0] as const
const wordHashPrimes = [0x0100_0193, 0x5bd1_e995] as const

/**
 * Word → posting list, looked up from the units of the text it is in (no substring made): a
 * `GramLists` keyed by two 32-bit hashes of the word's units, each hit checked against the word
 * itself; a word whose two hashes another word has already (odds of about 2^-64 a pair) is kept in
 * a `Map` instead. A `Map` of the words split out of each text took a sixth of a bulk build.
 */
export class WordLists {
  private readonly byHashes = new GramLists()
  /** The word of each list in `byHashes`, by list. */
  private readonly wordOfList: Array<string> = []
  private readonly collided = new Map<string, number>()

  /** The list of `text`'s units [start, end) (hashed `first`, `second`), or -1. */
  get(text: string, start: number, end: number, first: number, second: number): number {
    const list = this.byHashes.get(first, second)
    if (list === -1 || sameUnits(this.wordOfList[list]!, text, start, end)) return list
    return this.collided.get(text.slice(start, end)) ?? -1
  }

  /** Records the list of a word it does not hold. */
  add(word: string, first: number, second: number, list: number): void {
    if (this.byHashes.get(first, second) !== -1) {
      this.collided.set(word, list)
      return
    }
    this.byHashes.add(first, second, list)
    this.wordOfList[list] = word
  }
}

/** Whether `word` is `text`'s units [start, end). */
const sameUnits = (word: string, text: string, start: number, end: number): boolean => {
  if (word.length !== end - start) return false
  for (let i = 0; i < word.length; i++) if (word.charCodeAt(i) !== text.charCodeAt(start + i)) return false
  return true
}

/** The list of `needle` as a word in `words`, or undefined. */
const wordListOf = (words: WordLists, needle: string): number | undefined => {
  let first = wordHashSeeds[0]
  let second = wordHashSeeds[1]
  for (let i = 0; i < needle.length; i++) {
    const unit = needle.charCodeAt(i)
    first = Math.imul(first ^ unit, wordHashPrimes[0])
    second = Math.imul(second ^ unit, wordHashPrimes[1])
  }
  const list = words.get(needle, 0, needle.length, first, second)
  return list === -1 ? undefined : list
}

/** The official match rule on one entity's texts: some text, lower-cased, includes the lower-cased query. */
export const textsMatchQuery = (texts: ReadonlyArray<string>, query: string): boolean => {
  const needle = query.toLowerCase()
  return texts.some((text) => text.toLowerCase().includes(needle))
}

/** Counts describing the index's size, for benchmarks and diagnostics. */
export interface SubstringIndexStats {
  readonly documents: number
  readonly slots: number
  readonly postingLists: number
  readonly postings: number
  readonly livePostings: number
  readonly poolBytes: number
  /** Times the index rebuilt itself to drop stale postings and dead slots. */
  readonly rebuilds: number
}

/** One 32-bit key for two adjacent UTF-16 code units. */
const pairKey = (first: number, second: number): number => (first << 16) | second

/** How a query's posting lists yield candidates: exactly (union of lists) or as a superset to verify. */
type Lookup =
  | { readonly kind: "none" }
  | { readonly kind: "exact"; readonly lists: ReadonlyArray<number> }
  | { readonly kind: "superset"; readonly lists: ReadonlyArray<number>; readonly word: number | undefined }

/** Tuning knobs; the defaults suit production, tests change them to reach every code path. */
export interface SubstringIndexOptions {
  /** Rebuild once stale postings exceed both this and the live postings. */
  readonly stalePostingsBeforeRebuildMin?: number
  /** Rebuild once removed documents' slots exceed both this and the live documents. */
  readonly deadSlotsBeforeRebuildMin?: number
  /** Mark generations before the marks are cleared (tests lower it to exercise the wrap). */
  readonly stampGenerationsMax?: number
  /** Stop intersecting trigram lists once this few candidates remain. */
  readonly candidatesWorthIntersecting?: number
  /** Relative cost of verifying a candidate vs marking a posting; higher intersects more. */
  readonly verifyToMarkCostRatio?: number
}

/** A substring index over documents keyed by `K`, each a list of texts. */
export class SubstringIndex<K> {
  private readonly stalePostingsBeforeRebuildMin: number
  private readonly deadSlotsBeforeRebuildMin: number
  private readonly candidatesWorthIntersecting: number
  private readonly verifyToMarkCostRatio: number
  private pool = new PostingPool()
  /** Each code unit's and each trigram's list of the slots containing it. */
  private gramLists = new GramLists()
  /** Pair key → the lists of the trigrams starting with that pair (a two-unit query's). */
  private trigramListsOfPair = new Map<number, Array<number>>()
  /** Word → list of slots containing it as a word. */
  private wordLists = new WordLists()
  private readonly listStamps: StampSet
  private readonly slotStamps: StampSet
  private slotKeys: Array<K | undefined> = []
  /** Lower-cased texts joined by `textSeparator`; undefined for a removed document. */
  private slotJoined: Array<string | undefined> = []
  /** Length of each lower-cased text in `slotJoined`. */
  private slotTextLengths: Array<ReadonlyArray<number>> = []
  /** The lists of the document being posted (`listsOf`), grown as needed. */
  private listBuffer = new Int32Array(1024)
  /** Number of lists the slot is currently in. */
  private slotPostings: Array<number> = []
  /** The slot left postings for grams it no longer has, so its postings prove nothing. */
  private slotStale: Array<boolean> = []
  private readonly slotOf = new Map<K, number>()
  private livePostings = 0
  /** Live slots marked stale. */
  private staleSlots = 0
  private rebuildCount = 0

  constructor(options: SubstringIndexOptions = {}) {
    this.stalePostingsBeforeRebuildMin = options.stalePostingsBeforeRebuildMin ?? stalePostingsBeforeRebuildMinDefault
    this.deadSlotsBeforeRebuildMin = options.deadSlotsBeforeRebuildMin ?? deadSlotsBeforeRebuildMinDefault
    this.candidatesWorthIntersecting = options.candidatesWorthIntersecting ?? candidatesWorthIntersectingDefault
    this.verifyToMarkCostRatio = options.verifyToMarkCostRatio ?? verifyToMarkCostRatioDefault
    const generations = Math.max(stampGenerationsPerQueryMin, options.stampGenerationsMax ?? stampGenerationsMaxDefault)
    this.listStamps = new StampSet(generations)
    this.slotStamps = new StampSet(generations)
  }

  /** Number of documents. */
  get size(): number {
    return this.slotOf.size
  }

  /** Whether a document with this key is indexed. */
  has(key: K): boolean {
    return this.slotOf.has(key)
  }

  /** Adds a document at the end, or replaces the texts of an existing one keeping its position. */
  upsert(key: K, texts: ReadonlyArray<string>): void {
    const lowered = texts.map((text) => text.toLowerCase())
    const slot = this.slotOf.get(key)
    if (slot === undefined) {
      this.append(key, lowered)
      return
    }
    const previous = this.textsOf(slot)
    this.store(slot, lowered)
    const { postings, dropped } = this.post(slot, lowered, previous)
    this.livePostings += postings - this.slotPostings[slot]!
    this.slotPostings[slot] = postings
    if (dropped && !this.slotStale[slot]) {
      this.slotStale[slot] = true
      this.staleSlots++
    }
    this.maybeRebuild()
  }

  /** Removes a document; returns whether it was there. */
  remove(key: K): boolean {
    const slot = this.slotOf.get(key)
    if (slot === undefined) return false
    this.slotOf.delete(key)
    if (this.slotStale[slot]) {
      this.slotStale[slot] = false
      this.staleSlots--
    }
    this.slotKeys[slot] = undefined
    this.slotJoined[slot] = undefined
    this.slotTextLengths[slot] = []
    this.livePostings -= this.slotPostings[slot]!
    this.slotPostings[slot] = 0
    this.maybeRebuild()
    return true
  }

  /** Removes every document. */
  clear(): void {
    this.rebuildFrom([])
  }

  /** Keys of all documents, in insertion order. */
  keys(): Array<K> {
    const keys: Array<K> = []
    for (let slot = 0; slot < this.slotKeys.length; slot++) {
      if (this.slotJoined[slot] !== undefined) keys.push(this.slotKeys[slot] as K)
    }
    return keys
  }

  /** Keys of the documents matching `query` under the official rule, in insertion order. */
  search(query: string): Array<K> {
    const needle = query.toLowerCase()
    if (needle.length === 0) return this.keys()
    const lookup = this.lookup(needle)
    if (lookup.kind === "none") return []
    // No wrap may clear marks mid-query: union, proof, two per narrowing step, ordering.
    this.slotStamps.reserve(lookup.kind === "exact" ? 2 : 2 * lookup.lists.length + 4)
    let matches: Array<number> = []
    const stale = this.slotStale
    const hasSeparator = needle.includes(textSeparator)
    if (lookup.kind === "exact") {
      const found = this.union(lookup.lists)
      if (this.staleSlots === 0) matches = found
      else for (const slot of found) if (!stale[slot] || this.contains(slot, needle, hasSeparator)) matches.push(slot)
    } else {
      const unproven = this.provenInto(this.union(lookup.lists.slice(0, 1)), lookup.word, matches)
      for (const slot of this.narrow(unproven, lookup.lists.slice(1))) {
        if (this.contains(slot, needle, hasSeparator)) matches.push(slot)
      }
    }
    const ordered = this.inSlotOrder(matches)
    const keys = new Array<K>(ordered.length)
    for (let i = 0; i < ordered.length; i++) keys[i] = this.slotKeys[ordered[i]!] as K
    return keys
  }

  /**
   * Lets the posting lists go of the room they kept to grow: for after adding many documents at
   * once (a model built from a store, a rebuild). Later additions grow the lists as before.
   */
  compact(): void {
    this.pool = this.pool.compacted()
  }

  /** Size counters. */
  stats(): SubstringIndexStats {
    return {
      documents: this.slotOf.size,
      slots: this.slotKeys.length,
      postingLists: this.pool.listCount,
      postings: this.pool.entries,
      livePostings: this.livePostings,
      poolBytes: this.pool.bytes,
      rebuilds: this.rebuildCount,
    }
  }

  private append(key: K, lowered: ReadonlyArray<string>): void {
    const slot = this.slotKeys.length
    this.slotKeys.push(key)
    this.slotJoined.push(undefined)
    this.slotTextLengths.push([])
    this.slotStale.push(false)
    this.slotOf.set(key, slot)
    this.slotStamps.ensure(slot + 1)
    this.store(slot, lowered)
    const { postings } = this.post(slot, lowered, [])
    this.slotPostings.push(postings)
    this.livePostings += postings
  }

  private store(slot: number, lowered: ReadonlyArray<string>): void {
    this.slotJoined[slot] = lowered.join(textSeparator)
    this.slotTextLengths[slot] = lowered.map((text) => text.length)
  }

  /** The slot's lower-cased texts, cut back out of the joined form. */
  private textsOf(slot: number): Array<string> {
    const joined = this.slotJoined[slot]!
    const texts: Array<string> = []
    let start = 0
    for (const length of this.slotTextLengths[slot]!) {
      texts.push(joined.slice(start, start + length))
      start += length + textSeparator.length
    }
    return texts
  }

  /** Whether some lower-cased text of the slot includes `needle` (which contains `textSeparator` iff the flag says so). */
  private contains(slot: number, needle: string, needleHasSeparator: boolean): boolean {
    // Without a separator in the needle, a match in the joined form lies inside one text.
    if (!needleHasSeparator) return this.slotJoined[slot]!.includes(needle)
    return this.textsOf(slot).some((text) => text.includes(needle))
  }

  /**
   * Posts `slot` to every list of `texts` that `previous` (its texts before this update) was
   * not in. Returns how many lists the slot is now in, and whether it left some list of
   * `previous` (a stale posting).
   */
  private post(
    slot: number,
    texts: ReadonlyArray<string>,
    previous: ReadonlyArray<string>,
  ): { readonly postings: number; readonly dropped: boolean } {
    const stamps = this.listStamps
    stamps.reserve(2)
    const before = stamps.next()
    let previousPostings = 0
    let count = this.listsOf(previous)
    let lists = this.listBuffer
    for (let i = 0; i < count; i++) {
      const list = lists[i]!
      if (stamps.values[list] !== before) {
        stamps.values[list] = before
        previousPostings++
      }
    }
    const now = stamps.next()
    let postings = 0
    let kept = 0
    count = this.listsOf(texts)
    lists = this.listBuffer
    const marks = stamps.values
    for (let i = 0; i < count; i++) {
      const list = lists[i]!
      const stamp = marks[list]
      if (stamp === now) continue
      if (stamp === before) kept++
      else this.pool.append(list, slot)
      marks[list] = now
      postings++
    }
    return { postings, dropped: kept < previousPostings }
  }

  /**
   * Puts in `listBuffer` the list (created on first use) of every unit, trigram and word of every
   * text, repeats included; returns how many.
   */
  private listsOf(texts: ReadonlyArray<string>): number {
    let count = 0
    const [firstPrime, secondPrime] = wordHashPrimes
    for (const text of texts) {
      const length = text.length
      // A unit's, a trigram's and at most one word's per two units.
      if (this.listBuffer.length < count + 3 * length)
        this.listBuffer = grow32(this.listBuffer, 2 * (count + 3 * length))
      const lists = this.listBuffer
      const words = length >= wordUnitsMin
      let wordStart = -1
      let first = 0
      let second = 0
      let unit = length > 0 ? text.charCodeAt(0) : 0
      let separator = words && length > 0 && isWordSeparator(unit)
      for (let i = 0; i < length; i++) {
        const next = i + 1 < length ? text.charCodeAt(i + 1) : textEnd
        lists[count++] = this.unitList(unit)
        if (next !== textEnd)
          lists[count++] = this.trigramList(pairKey(unit, next), i + 2 < length ? text.charCodeAt(i + 2) : textEnd)
        if (words) {
          const nextSeparator = next === textEnd || isWordSeparator(next)
          if (!separator) {
            if (wordStart === -1) {
              wordStart = i
              first = wordHashSeeds[0]
              second = wordHashSeeds[1]
            }
            first = Math.imul(first ^ unit, firstPrime)
            second = Math.imul(second ^ unit, secondPrime)
          }
          if (wordStart !== -1 && nextSeparator) {
            const units = i + 1 - wordStart
            if (units >= wordUnitsMin && units <= wordUnitsMax)
              lists[count++] = this.wordList(text, wordStart, i + 1, first, second)
            wordStart = -1
          }
          separator = nextSeparator
        }
        unit = next
      }
    }
    return count
  }

  private unitList(unit: number): number {
    let list = this.gramLists.get(unit, unitGram)
    if (list === -1) {
      list = this.newList()
      this.gramLists.add(unit, unitGram, list)
    }
    return list
  }

  private trigramList(pair: number, third: number): number {
    let list = this.gramLists.get(pair, third)
    if (list === -1) {
      list = this.newList()
      this.gramLists.add(pair, third, list)
      const ofPair = this.trigramListsOfPair.get(pair)
      if (ofPair === undefined) this.trigramListsOfPair.set(pair, [list])
      else ofPair.push(list)
    }
    return list
  }

  private wordList(text: string, start: number, end: number, first: number, second: number): number {
    let list = this.wordLists.get(text, start, end, first, second)
    if (list === -1) {
      list = this.newList()
      this.wordLists.add(text.slice(start, end), first, second, list)
    }
    return list
  }

  private newList(): number {
    const list = this.pool.newList()
    this.listStamps.ensure(list + 1)
    return list
  }

  /** The lists to look in (see the module comment). */
  private lookup(needle: string): Lookup {
    const units = needle.length
    const unit = (i: number) => needle.charCodeAt(i)
    if (units === 1) {
      const list = this.gramLists.get(unit(0), unitGram)
      return list === -1 ? { kind: "none" } : { kind: "exact", lists: [list] }
    }
    const pair = pairKey(unit(0), unit(1))
    if (units === 2) {
      const lists = this.trigramListsOfPair.get(pair)
      return lists === undefined ? { kind: "none" } : { kind: "exact", lists }
    }
    if (units === 3) {
      const list = this.gramLists.get(pair, unit(2))
      return list === -1 ? { kind: "none" } : { kind: "exact", lists: [list] }
    }
    const lists = new Set<number>()
    for (let i = 0; i + 2 < units; i++) {
      const list = this.gramLists.get(pairKey(unit(i), unit(i + 1)), unit(i + 2))
      if (list === -1) return { kind: "none" }
      lists.add(list)
    }
    return {
      kind: "superset",
      lists: [...lists].sort((a, b) => this.pool.length(a) - this.pool.length(b)).slice(0, trigramListsPerQueryMax),
      word: wordListOf(this.wordLists, needle),
    }
  }

  /** Live slots in any of `lists`, each once. */
  private union(lists: ReadonlyArray<number>): Array<number> {
    const seen = this.slotStamps.next()
    const marks = this.slotStamps.values
    const joined = this.slotJoined
    const slots: Array<number> = []
    for (const list of lists) {
      const entries = this.pool.entriesOf(list)
      for (let i = 0; i < entries.length; i++) {
        const slot = entries[i]!
        if (marks[slot] !== seen && joined[slot] !== undefined) {
          marks[slot] = seen
          slots.push(slot)
        }
      }
    }
    return slots
  }

  /**
   * Moves the candidates that provably match (live in the word list of the needle, and not
   * stale) into `matches`; returns the rest.
   */
  private provenInto(candidates: Array<number>, word: number | undefined, matches: Array<number>): Array<number> {
    if (word === undefined) return candidates
    const proven = this.slotStamps.next()
    const marks = this.slotStamps.values
    const entries = this.pool.entriesOf(word)
    for (let i = 0; i < entries.length; i++) marks[entries[i]!] = proven
    const stale = this.slotStale
    const unproven: Array<number> = []
    for (const slot of candidates) {
      if (marks[slot] === proven && !stale[slot]) matches.push(slot)
      else unproven.push(slot)
    }
    return unproven
  }

  /**
   * Keeps the candidates that are also in `lists` (shortest first), intersecting a list only
   * while the candidates it is expected to drop would cost more to verify than it costs.
   */
  private narrow(candidates: Array<number>, lists: ReadonlyArray<number>): Array<number> {
    const marks = this.slotStamps.values
    const documents = Math.max(1, this.slotOf.size)
    for (const list of lists) {
      if (candidates.length <= this.candidatesWorthIntersecting) break
      const length = this.pool.length(list)
      const expectedDropped = candidates.length * Math.max(0, 1 - length / documents)
      if (expectedDropped * this.verifyToMarkCostRatio < length + 2 * candidates.length) break
      const inPrevious = this.slotStamps.next()
      for (let c = 0; c < candidates.length; c++) marks[candidates[c]!] = inPrevious
      const inBoth = this.slotStamps.next()
      const entries = this.pool.entriesOf(list)
      for (let j = 0; j < entries.length; j++) {
        const slot = entries[j]!
        if (marks[slot] === inPrevious) marks[slot] = inBoth
      }
      const kept: Array<number> = []
      for (let c = 0; c < candidates.length; c++) {
        const slot = candidates[c]!
        if (marks[slot] === inBoth) kept.push(slot)
      }
      candidates = kept
    }
    return candidates
  }

  /** `slots` in ascending order (= insertion order). */
  private inSlotOrder(slots: Array<number>): Array<number> {
    let sorted = true
    for (let i = 1; i < slots.length && sorted; i++) sorted = slots[i - 1]! < slots[i]!
    if (sorted) return slots
    const slotCount = this.slotKeys.length
    if (slots.length > slotCount / slotScanOrderDivisor) {
      const matched = this.slotStamps.next()
      const marks = this.slotStamps.values
      for (let i = 0; i < slots.length; i++) marks[slots[i]!] = matched
      const ordered: Array<number> = []
      for (let slot = 0; slot < slotCount; slot++) if (marks[slot] === matched) ordered.push(slot)
      return ordered
    }
    return Array.from(Uint32Array.from(slots).sort())
  }

  private maybeRebuild(): void {
    const stalePostings = this.pool.entries - this.livePostings
    const deadSlots = this.slotKeys.length - this.slotOf.size
    if (
      (stalePostings > this.stalePostingsBeforeRebuildMin && stalePostings > this.livePostings) ||
      (deadSlots > this.deadSlotsBeforeRebuildMin && deadSlots > this.slotOf.size)
    ) {
      const documents: Array<readonly [K, ReadonlyArray<string>]> = []
      for (let slot = 0; slot < this.slotKeys.length; slot++) {
        if (this.slotJoined[slot] !== undefined) documents.push([this.slotKeys[slot] as K, this.textsOf(slot)])
      }
      this.rebuildFrom(documents)
      this.rebuildCount++
    }
  }

  /** Starts over with these documents (texts already lower-cased), in this order. */
  private rebuildFrom(documents: ReadonlyArray<readonly [K, ReadonlyArray<string>]>): void {
    this.pool = new PostingPool()
    this.gramLists = new GramLists()
    this.trigramListsOfPair = new Map()
    this.wordLists = new WordLists()
    this.slotKeys = []
    this.slotJoined = []
    this.slotTextLengths = []
    this.slotPostings = []
    this.slotStale = []
    this.staleSlots = 0
    this.slotOf.clear()
    this.livePostings = 0
    for (const [key, lowered] of documents) this.append(key, lowered)
    this.compact()
  }
}
