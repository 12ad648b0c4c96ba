/**
 * An in-memory `WalFs` (`src/stores/wal/WalFs.ts`) that keeps what a real disk keeps across power loss.
 *
 * Model: each file has a *written* image (what reads see) and a *durable* one (what survives a crash);
 * `datasync` copies the first onto the second. Each directory has a written and a durable listing:
 * creations, renames and removals wait for `syncDir` of their directory, and at `crash()` each waiting
 * change persists or not, a rename as one change. `mkdirp` is durable at once. `crash()` tears files.
 *
 * Invariants: the same seed and calls give the same outcomes; WalFs calls never throw (failures are
 * `FsError`s); what `readDurable` shows (data after `datasync`, entry after `syncDir`) survives every
 * crash, unless a later change (write, truncate, rename, removal) replaces it. Operation
 * indices (`opCount`, `failAfter`, `crashAfter`) count the calls that touch the disk (open, write,
 * datasync, truncate, syncDir, rename, remove) and are 0-based: `crashAfter(0)` cuts the very next one.
 */
import { posix } from "node:path"
import { Deferred, Effect, Layer } from "effect"
import { FsError, type FsErrorReason, type WalFile, WalFs } from "../../src/stores/wal/WalFs.ts"

/** Default sector size in bytes: the unit a torn write keeps or loses whole. */
export const defaultSectorBytes = 512

/** The disk-touching operations as `FsError.op` names them, for `failAfter`; "any" matches all of them. */
export type FaultOp = "open" | "write" | "fdatasync" | "truncate" | "fsync-dir" | "rename" | "unlink" | "any"

/**
 * `seed` drives every random choice: torn sectors, surviving sizes and directory entries.
 * `slowSyncs`: each fdatasync first waits for a turn of the event loop, as a real one waits for the
 * disk, so callers can send while a batch is being written (the store then pipelines: it decides the
 * next batch during the write). Without it every call completes at once.
 */
export type SimulatedDiskOptions = {
  readonly seed?: number
  readonly sectorBytes?: number
  readonly slowSyncs?: boolean
}

/** `persistent`: every matching operation from the n-th on fails, until `clearFaults()`. */
export type FaultOptions = { readonly op?: FaultOp; readonly kind?: "Io" | "NoSpace"; readonly persistent?: boolean }

/** Successful calls so far. */
export type SimulatedDiskStats = { writes: number; bytesWritten: number; datasyncs: number; syncDirs: number }

/** mulberry32: a small deterministic PRNG; each call returns the next uint32. */
const mulberry32 = (seed: number) => {
  let state = seed >>> 0
  return (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = Math.imul(state ^ (state >>> 15), state | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (t ^ (t >>> 14)) >>> 0
  }
}

/** A growable byte image; bytes of `bytes` past `size` are stale and never read. */
class Image {
  bytes = new Uint8Array(0)
  size = 0
  write(offset: number, data: Uint8Array): void {
    if (data.length === 0) return
    this.truncate(Math.max(this.size, offset + data.length))
    this.bytes.set(data, offset)
  }
  truncate(size: number): void {
    if (size > this.bytes.length) {
      const grown = new Uint8Array(Math.max(size, this.bytes.length * 2))
      grown.set(this.bytes.subarray(0, this.size))
      this.bytes = grown
    }
    if (size > this.size) this.bytes.fill(0, this.size, size)
    this.size = size
  }
  at(index: number): number {
    return index < this.size ? this.bytes[index]! : 0
  }
  snapshot(): Uint8Array {
    return this.bytes.slice(0, this.size)
  }
}

/** A file's two images: they agree on [0, dirtyFrom) and are equal while `dirtyFrom` is Infinity. */
class Inode {
  readonly written = new Image()
  readonly durable = new Image()
  dirtyFrom = Number.POSITIVE_INFINITY
  write(offset: number, data: Uint8Array): void {
    if (data.length === 0) return
    this.dirtyFrom = Math.min(this.dirtyFrom, offset, this.written.size)
    this.written.write(offset, data)
  }
  truncate(size: number): void {
    this.dirtyFrom = Math.min(this.dirtyFrom, size, this.written.size)
    this.written.truncate(size)
  }
  datasync(): void {
    if (this.dirtyFrom === Number.POSITIVE_INFINITY) return
    this.durable.truncate(this.written.size)
    this.durable.write(this.dirtyFrom, this.written.bytes.subarray(this.dirtyFrom, this.written.size))
    this.dirtyFrom = Number.POSITIVE_INFINITY
  }
}

type Directory = { readonly written: Map<string, Inode>; durable: Map<string, Inode> }
/** One entry change in one directory; `inode: undefined` unlinks the name. */
type EntryChange = { readonly dir: string; readonly name: string; readonly inode: Inode | undefined }
/** A queued directory operation, applied whole or not at all; `forced` once a `syncDir` made part of it durable. */
type PendingOp = { changes: ReadonlyArray<EntryChange>; forced: boolean }
type Fault = { readonly op: FaultOp; readonly kind: "Io" | "NoSpace"; readonly persistent: boolean; remaining: number }

const emptyDir = (): Directory => ({ written: new Map(), durable: new Map() })
const crashMessage = "simulated crash: the disk has lost power"
const normalize = (path: string): string => posix.resolve("/", path)
const fsError = (reason: FsErrorReason, op: string, path: string, message: string) =>
  new FsError({ reason, op, path, message })
const split = (path: string) => {
  const p = normalize(path)
  return { p, dir: posix.dirname(p), name: posix.basename(p) }
}
const setEntry = (listing: Map<string, Inode>, { name, inode }: EntryChange) =>
  inode === undefined ? listing.delete(name) : listing.set(name, inode)
const isOffset = (n: number) => Number.isSafeInteger(n) && n >= 0
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

export class SimulatedDisk {
  readonly sectorBytes: number
  readonly stats: SimulatedDiskStats = { writes: 0, bytesWritten: 0, datasyncs: 0, syncDirs: 0 }
  private readonly random: () => number
  private readonly dirs = new Map<string, Directory>([["/", emptyDir()]])
  private pending: Array<PendingOp> = []
  private faults: Array<Fault> = []
  private ops = 0
  /** The last durable write queued on this disk: the next one waits for it to settle (WalFs.ts). */
  private lastQueued: Deferred.Deferred<void, FsError> | undefined
  private crashAt = Number.POSITIVE_INFINITY
  private dead = false
  private readonly coin = () => this.random() >= 2 ** 31
  private readonly slowSyncs: boolean

  constructor(options: SimulatedDiskOptions = {}) {
    this.sectorBytes = options.sectorBytes ?? defaultSectorBytes
    if (!Number.isSafeInteger(this.sectorBytes) || this.sectorBytes <= 0) {
      throw new RangeError(`sectorBytes must be a positive integer, got ${this.sectorBytes}`)
    }
    this.random = mulberry32(options.seed ?? 0x5eed)
    this.slowSyncs = options.slowSyncs ?? false
  }

  /** Disk-touching calls made while powered on, failed ones and the one the power cut included. */
  get opCount(): number {
    return this.ops
  }

  /** True once `crashAfter` fired or `crash()` was called: every WalFs call now fails. */
  get crashed(): boolean {
    return this.dead
  }

  /** The n-th matching disk operation from now (0-based: n matching ones succeed first) fails, changing nothing. */
  failAfter(n: number, options: FaultOptions = {}): void {
    const { op = "any", kind = "Io", persistent = false } = options
    this.faults.push({ op, kind, persistent, remaining: n })
  }

  clearFaults(): void {
    this.faults = []
  }

  /** Cuts the power at the n-th disk operation from now (0-based): it and every later call fail. */
  crashAfter(n: number): void {
    this.crashAt = this.ops + n
  }

  /**
   * Powers this disk off for good and returns a new disk (same sector size) holding what survived. Each
   * sector that differs between a file's images keeps its whole new or whole old content (old bytes past
   * the durable size are zeros); a file that grew since its last `datasync` ends at a sector boundary
   * between the two sizes (or at either size), one that shrank at one of the two sizes (if at the old one,
   * the cut-off sectors keep their old bytes). A file whose directory entry is lost is gone.
   */
  crash(): SimulatedDisk {
    this.dead = true
    const next = new SimulatedDisk({ seed: this.random(), sectorBytes: this.sectorBytes })
    const listings = new Map([...this.dirs].map(([dir, entry]) => [dir, new Map(entry.durable)]))
    for (const op of this.pending) {
      if (op.forced || this.coin()) for (const change of op.changes) setEntry(listings.get(change.dir)!, change)
    }
    // Map order is insertion order, so the same calls visit files (and draw random numbers) in the same order.
    const survivors = new Map<Inode, Inode>()
    for (const [dir, listing] of listings) {
      for (const [name, inode] of listing) {
        if (!survivors.has(inode)) survivors.set(inode, this.survivor(inode))
        listing.set(name, survivors.get(inode)!)
      }
      next.dirs.set(dir, { written: listing, durable: new Map(listing) })
    }
    return next
  }

  /** The durable image at `path` through the durable listing: what is certain to survive a crash. */
  readDurable(path: string): Uint8Array | undefined {
    const { dir, name } = split(path)
    return this.dirs.get(dir)?.durable.get(name)?.durable.snapshot()
  }

  /** The written image at `path`: what reads see now. */
  readWritten(path: string): Uint8Array | undefined {
    return this.lookup(normalize(path))?.written.snapshot()
  }

  /** Inverts the byte at `offset` in both images of the file; throws when neither image holds it. */
  flipByte(path: string, offset: number): void {
    const inode = this.lookup(normalize(path))
    const images = inode ? [inode.written, inode.durable].filter((image) => offset >= 0 && offset < image.size) : []
    if (images.length === 0) throw new RangeError(`no byte ${offset} in ${path}`)
    for (const image of images) image.bytes[offset] = image.bytes[offset]! ^ 0xff
  }

  /** Sorted paths of the files in the written (default) or durable directory listings. */
  files(view: "written" | "durable" = "written"): ReadonlyArray<string> {
    const paths: Array<string> = []
    for (const [dir, entry] of this.dirs) for (const name of entry[view].keys()) paths.push(posix.join(dir, name))
    return paths.sort()
  }

  /** The WalFs service over this disk. */
  service(): WalFs["Service"] {
    return WalFs.of({
      mkdirp: (dir) =>
        this.act("mkdir", dir, false, () => {
          for (let d = normalize(dir); !this.dirs.has(d); d = posix.dirname(d)) this.dirs.set(d, emptyDir())
        }),
      list: (dir) =>
        this.act("readdir", dir, false, () => {
          const d = normalize(dir)
          const entry = this.dirs.get(d)
          if (!entry) return []
          const subdirs = [...this.dirs.keys()].filter((s) => s !== d && posix.dirname(s) === d)
          return [...entry.written.keys(), ...subdirs.map((s) => posix.basename(s))].sort()
        }),
      open: (path, { create }) =>
        this.act("open", path, true, () => {
          const { p, dir, name } = split(path)
          const entry = this.dirs.get(dir)
          const inode = entry?.written.get(name) ?? (entry && create ? new Inode() : undefined)
          if (!inode) return fsError("NotFound", "open", p, `no such file: ${p}`)
          if (!entry?.written.has(name)) this.link([{ dir, name, inode }])
          return this.file(p, inode)
        }),
      remove: (path) =>
        this.act("unlink", path, true, () => {
          const { p, dir, name } = split(path)
          if (!this.dirs.get(dir)?.written.has(name)) return fsError("NotFound", "unlink", p, `no such file: ${p}`)
          this.link([{ dir, name, inode: undefined }])
        }),
      rename: (from, to) =>
        this.act("rename", from, true, () => {
          const [f, t] = [split(from), split(to)]
          const inode = this.lookup(f.p)
          if (!inode || !this.dirs.has(t.dir)) return fsError("NotFound", "rename", f.p, `cannot rename to ${t.p}`)
          const [unlink, link] = [
            { dir: f.dir, name: f.name, inode: undefined },
            { dir: t.dir, name: t.name, inode },
          ]
          if (f.p !== t.p) this.link([unlink, link])
        }),
      syncDir: (dir) =>
        this.act("fsync-dir", dir, true, () => {
          const d = normalize(dir)
          const entry = this.dirs.get(d)
          if (!entry) return fsError("NotFound", "fsync-dir", d, `no such directory: ${d}`)
          entry.durable = new Map(entry.written)
          for (const op of this.pending) {
            const rest = op.changes.filter((change) => change.dir !== d)
            if (rest.length === op.changes.length) continue
            op.changes = rest
            op.forced = true
          }
          this.pending = this.pending.filter((op) => op.changes.length > 0)
          this.stats.syncDirs++
        }),
      // A disk with a persistent no-space fault armed is full; otherwise it has room to spare.
      freeBytes: (dir) =>
        this.act("statfs", dir, false, () =>
          this.faults.some((fault) => fault.kind === "NoSpace" && fault.persistent) ? 0 : this.freeBytesWhenNotFull,
        ),
    })
  }

  /** What `freeBytes` reports while no persistent no-space fault is armed. */
  freeBytesWhenNotFull = 2 ** 40

  private lookup(path: string): Inode | undefined {
    return this.dirs.get(posix.dirname(path))?.written.get(posix.basename(path))
  }

  /** Applies entry changes to the written listings and queues them until their directories are synced. */
  private link(changes: ReadonlyArray<EntryChange>): void {
    for (const change of changes) setEntry(this.dirs.get(change.dir)!.written, change)
    this.pending.push({ changes, forced: false })
  }

  /** Runs one WalFs call: power and fault checks first (disk-touching calls only count), then `body`. */
  private act<A>(op: string, path: string, touchesDisk: boolean, body: () => A | FsError, onPowerCut?: () => void) {
    return Effect.suspend(() => {
      const result = this.gate(op, normalize(path), touchesDisk, onPowerCut) ?? body()
      return result instanceof FsError ? Effect.fail(result) : Effect.succeed(result)
    })
  }

  private gate(op: string, path: string, touchesDisk: boolean, onPowerCut?: () => void): FsError | undefined {
    if (this.dead) return fsError("Io", op, path, crashMessage)
    if (!touchesDisk) return undefined
    if (this.ops++ === this.crashAt) {
      this.dead = true
      onPowerCut?.()
      return fsError("Io", op, path, crashMessage)
    }
    let fired: Fault | undefined
    for (const fault of this.faults) {
      if (fault.op !== "any" && fault.op !== op) continue
      if (fault.remaining > 0) fault.remaining--
      else fired ??= fault
    }
    if (!fired) return undefined
    if (!fired.persistent) this.faults = this.faults.filter((fault) => fault !== fired)
    return fsError(fired.kind, op, path, `simulated ${fired.kind} fault`)
  }

  private file(path: string, inode: Inode): WalFile {
    let closed = false
    // The last durable write queued to this file, and the failure that refuses later ones.
    let lastQueuedHere: Deferred.Deferred<void, FsError> | undefined
    let durableFailure: FsError | undefined
    const use = <A>(op: string, touchesDisk: boolean, body: () => A | FsError, onPowerCut?: () => void) =>
      this.act(op, path, touchesDisk, () => (closed ? fsError("Io", op, path, "file is closed") : body()), onPowerCut)
    const invalid = (op: string) => fsError("Io", op, path, "invalid offset or length")
    const write = (offset: number, bytes: Uint8Array) => {
      const apply = () => {
        if (!isOffset(offset)) return invalid("write")
        inode.write(offset, bytes)
        this.stats.writes++
        this.stats.bytesWritten += bytes.length
      }
      return use("write", true, apply, () => closed || this.tear(inode, offset, bytes))
    }
    const datasync = () => {
      const sync = use("fdatasync", true, () => {
        inode.datasync()
        this.stats.datasyncs++
      })
      return this.slowSyncs ? Effect.andThen(nextTurn, sync) : sync
    }
    return {
      path,
      size: () => use("stat", false, () => inode.written.size),
      read: (offset, length) =>
        use("read", false, () =>
          isOffset(offset) && isOffset(length)
            ? inode.written.bytes.slice(offset, Math.max(offset, Math.min(offset + length, inode.written.size)))
            : invalid("read"),
        ),
      write,
      datasync,
      // Two operations, as on a disk without O_DSYNC: a crash or fault can come between them. Made by a
      // fiber of its own once the write queued before it settled, as the WAL writer thread does.
      queueDurable: (offset, bytes) =>
        Effect.suspend(() => {
          const done = Deferred.makeUnsafe<void, FsError>()
          const previous = this.lastQueued
          this.lastQueued = done
          lastQueuedHere = done
          const copy = bytes.slice()
          const run = Effect.gen(function* () {
            if (previous !== undefined) yield* Effect.exit(Deferred.await(previous))
            if (durableFailure !== undefined) {
              return yield* fsError(
                "Io",
                "write",
                path,
                `an earlier write to this file failed: ${durableFailure.message}`,
              )
            }
            yield* write(offset, copy)
            yield* datasync()
          }).pipe(
            Effect.tapError((error) =>
              Effect.sync(() => {
                durableFailure ??= error
              }),
            ),
            Effect.exit,
            Effect.flatMap((exit) => Deferred.done(done, exit)),
          )
          return Effect.as(Effect.forkDetach(run), done)
        }),
      truncate: (length) =>
        use("truncate", true, () => (isOffset(length) ? inode.truncate(length) : invalid("truncate"))),
      close: () =>
        Effect.andThen(
          Effect.suspend(() =>
            lastQueuedHere === undefined ? Effect.void : Effect.exit(Deferred.await(lastQueuedHere)),
          ),
          Effect.sync(() => {
            closed = true
          }),
        ),
    }
  }

  /** A write cut by the power loss: each sector-sized piece of it independently reached the written image. */
  private tear(inode: Inode, offset: number, bytes: Uint8Array): void {
    if (!isOffset(offset)) return
    const end = offset + bytes.length
    for (let start = offset; start < end; ) {
      const stop = Math.min(end, (Math.floor(start / this.sectorBytes) + 1) * this.sectorBytes)
      if (this.coin()) inode.write(start, bytes.subarray(start - offset, stop - offset))
      start = stop
    }
  }

  /** The file as it reads after reboot: surviving size, then per differing sector old or new content. */
  private survivor({ written, durable, dirtyFrom }: Inode): Inode {
    const sector = this.sectorBytes
    let size = written.size
    if (written.size < durable.size) size = this.coin() ? written.size : durable.size
    else if (written.size > durable.size) {
      const sizes = [durable.size]
      for (let b = (Math.floor(durable.size / sector) + 1) * sector; b < written.size; b += sector) sizes.push(b)
      sizes.push(written.size)
      size = sizes[Math.floor((this.random() / 2 ** 32) * sizes.length)]!
    }
    const bytes = new Uint8Array(size)
    const clean = Math.min(dirtyFrom, size)
    const cleanSectors = clean - (clean % sector)
    bytes.set(durable.bytes.subarray(0, cleanSectors))
    for (let start = cleanSectors; start < size; start += sector) {
      const end = Math.min(start + sector, size)
      // A sector wholly past the written size was cut off by a truncate whose size did not survive: old bytes.
      let differs = false
      if (start < written.size) for (let i = start; i < end && !differs; i++) differs = written.at(i) !== durable.at(i)
      const source = differs && this.coin() ? written : durable
      for (let i = start; i < end; i++) bytes[i] = source.at(i)
    }
    const survivor = new Inode()
    survivor.write(0, bytes)
    survivor.datasync()
    return survivor
  }
}

/** The WalFs layer over `disk`; after `disk.crash()`, build a new layer from the disk it returned. */
export const layer = (disk: SimulatedDisk): Layer.Layer<WalFs> => Layer.succeed(WalFs, disk.service())
