/**
 * Room on disk before an LMDB write: a transaction is started only when the file system holding
 * its environment has room for everything the transaction can add to the file.
 *
 * Why: lmdb-js 3.5.6's LMDB reports a failed page write (`pwritev` returning -1: ENOSPC, EDQUOT,
 * EIO) by formatting "Attempting to write page at position …, size …, blocks …, buffer sizes … … …"
 * into a 100-byte `malloc` (mdb.c, mdb_page_flush). With a file of a few MiB and large values the
 * text is longer than that ("… position 12423168, size 4435968, blocks 27, buffer sizes 184320
 * 184320 184320" is 106 bytes with its terminator): the heap is corrupted, and the daemon died
 * later in `malloc(): invalid next size` (SIGABRT) — 1 of 14 runs of test/stores/FullDisk.test.ts's
 * first test on a loaded machine, 10 of which made LMDB fail 4–6 page writes (one a second). No
 * error handling after the fact can undo that, so LMDB must not reach a full disk: a commit the
 * disk has no room for is refused as `DiskFullError` before LMDB writes anything, and tried again
 * (by the same check) once space returns.
 *
 * What is left: a file system that fills between the check and LMDB's write (another program, or
 * more than `headroomBytes` taken by this daemon's other files meanwhile), a user quota (statfs does
 * not see it), or a file system that does not report its free space (checked as having room).
 */
import { statfsSync } from "node:fs"

/**
 * Room kept beyond a transaction's own bound: one write-ahead-log segment's preallocation (4 MiB,
 * src/stores/wal/FileWal.ts), which a store's log on the same disk can take at any moment.
 */
export const headroomBytes = 4 * 1024 * 1024

/** The shape of an LMDB database and its environment, as lmdb-js's `getStats()` gives them. */
export interface TreeShape {
  readonly pageSize: number
  readonly treeDepth: number
  readonly treeBranchPageCount: number
  readonly treeLeafPageCount: number
  /** The environment's last page in use: the file's pages are this plus one. */
  readonly lastPageNumber: number
}

/** The bytes a write puts: its key's and its value's (encoded, as LMDB stores them). */
export interface WriteSize {
  readonly keyBytes: number
  /** Undefined for a removal. */
  readonly valueBytes: number | undefined
}

/** A node's bytes besides its key and value (header and index slot), rounded up. */
const nodeOverheadBytes = 16

/**
 * An upper bound on the bytes one write transaction of `writes` into the database shaped `tree`
 * adds to the environment's file. LMDB copies every page it changes to a new one (at most once per
 * transaction), so the file grows by at most the pages the transaction makes dirty:
 * - the existing pages it changes: a leaf per write (two for a removal, which may merge into its
 *   sibling), but no more than the tree has, and every branch page;
 * - a value too large for a leaf node goes to overflow pages of its own;
 * - a leaf splits when the bytes put into it overflow it, at most once per write and at most once
 *   per quarter page of bytes put, and each split can split the branch pages above it, a quarter as
 *   often level by level (at most as many again);
 * - the free list records every page freed (8 bytes a page, at most the whole file) in a tree of
 *   its own;
 * - the other databases' records it changes (the applied sequence, the names' root pages).
 */
export const transactionGrowthBound = (tree: TreeShape, writes: ReadonlyArray<WriteSize>): number => {
  const page = tree.pageSize
  let overflowPages = 0
  let inlineBytes = 0
  let leavesTouched = 0
  for (const write of writes) {
    const node = write.keyBytes + (write.valueBytes ?? 0) + nodeOverheadBytes
    leavesTouched += write.valueBytes === undefined ? 2 : 1
    if (write.valueBytes !== undefined && node > page / 4) {
      overflowPages += Math.ceil((write.valueBytes + nodeOverheadBytes) / page)
      inlineBytes += write.keyBytes + nodeOverheadBytes
    } else inlineBytes += node
  }
  const touched = Math.min(leavesTouched, tree.treeLeafPageCount) + tree.treeBranchPageCount
  const splits = 2 * Math.min(writes.length, Math.ceil((4 * inlineBytes) / page) + 1) + tree.treeDepth + 1
  const filePages = tree.lastPageNumber + 1 + overflowPages + touched + splits
  const freeList = Math.ceil((8 * filePages) / page) + 2 * (tree.treeDepth + 2)
  const otherRecords = 16
  return (overflowPages + touched + splits + freeList + otherRecords) * page
}

/**
 * The bytes an unprivileged writer may still take on the file system holding `path`; undefined
 * when it cannot be read, or the file system does not say (it reports no size).
 */
export const freeBytes = (path: string): number | undefined => {
  try {
    const stats = statfsSync(path)
    return stats.blocks > 0 ? stats.bavail * stats.bsize : undefined
  } catch {
    return undefined
  }
}

/**
 * Why a write of `bytes` to the LMDB environment at `path` must not start (its file system has less
 * room than that and `headroomBytes`), or undefined when it may.
 */
export const noRoomFor = (path: string, bytes: number): string | undefined => {
  const free = freeBytes(path)
  if (free === undefined || free >= bytes + headroomBytes) return undefined
  const mib = (count: number) => `${(count / 1024 / 1024).toFixed(1)} MiB`
  return `No space left on device: ${mib(free)} free, and LMDB's next transaction may need ${mib(bytes)} besides the ${mib(headroomBytes)} kept in reserve`
}
