/**
 * The WAL writer thread: makes the durable writes of every WAL file of this process, one at a time,
 * in the order they were queued.
 *
 * Why a thread of its own. A store pipelines its batches: while batch N is on its way to the disk,
 * the actor decides batch N+1 and queues its write. Through libuv's thread pool that next write
 * could only be started by the event loop once it heard that N was durable, and the event loop is
 * often busy right then (deciding N+2, answering N's callers, a GC pause), so the disk sat idle in
 * between. Here the write of N+1 starts on this thread the moment N's returns: the disk stays busy
 * whatever the event loop is doing (docs/benchmarks.md has the measurements).
 *
 * Guarantees (the `WalFile.queueDurable` contract of WalFs.ts):
 * - Writes are made by one thread, in queue order, with `writeSync` on descriptors opened
 *   `O_DSYNC`: each is durable when it returns, and the next one starts only after it.
 * - Once a write to a file fails, every later write queued to that file fails without touching it
 *   (its bytes may follow a gap), until the file is `forget`-ten when it is closed.
 * - Should the thread itself stop (it never should), every write it had not answered fails, its
 *   files are refused from then on, and the next write starts a new thread, which refuses every
 *   file that had a failed write as well.
 *
 * The hand-off shares memory instead of passing messages (issue 28: a `postMessage` per batch,
 * its structured clone and its message event on the event loop were the largest single cost of a
 * sequential write): the event loop copies a write's bytes into a shared ring and its descriptor
 * into a shared slot table, bumps a shared counter and wakes the thread (`Atomics.notify`); the
 * thread bumps a second counter per finished write, which the event loop awaits without blocking
 * (`Atomics.waitAsync`). A write too large for a quarter of the ring travels as a transferred
 * copy the thread takes from its port in order (`receiveMessageOnPort`), and so do the rare
 * failure reports back. Writes that find no free slot or ring space wait in the process, in
 * order, until earlier ones finish.
 *
 * The thread is started on the first write. It keeps the process alive only while writes are
 * waiting for it, as a pending libuv request would.
 */
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads"
import { keepV8FlagsAcross } from "../../runtime/V8Flags.ts"

/** Writes queued to the thread at once; more wait in the process until slots free up. */
const writerSlotsMax = 1024
/** The shared ring the queued writes' bytes travel in; a larger write travels in a message. */
const writerRingBytes = 1 << 20

/** What a slot holds. */
const slotWrite = 0
const slotLargeWrite = 1
const slotForget = 2

/**
 * The thread's code (CommonJS, evaluated: no file to locate in dist/ or under the test runner).
 * `control[0]` counts the slots queued (written by the event loop), `control[1]` the slots done
 * (written by the thread); both wrap at 2^32, and the slot of count n is n % writerSlotsMax.
 */
const threadSource = `
const { workerData, receiveMessageOnPort } = require("node:worker_threads")
const { writeSync } = require("node:fs")
const { port, slotsMax } = workerData
const control = new Int32Array(workerData.control)
const numbers = new Float64Array(workerData.numbers)
const kinds = new Int32Array(workerData.kinds)
const ring = new Uint8Array(workerData.ring)
const failed = new Map()
let done = 0
for (;;) {
  if (Atomics.load(control, 0) === done) {
    Atomics.wait(control, 0, done)
    continue
  }
  const slot = (done >>> 0) % slotsMax
  const kind = kinds[slot * 2]
  const file = numbers[slot * 4]
  if (kind === ${slotForget}) failed.delete(file)
  else {
    const bytes = kind === ${slotLargeWrite}
      ? receiveMessageOnPort(port).message
      : ring.subarray(kinds[slot * 2 + 1], kinds[slot * 2 + 1] + numbers[slot * 4 + 3])
    const earlier = failed.get(file)
    if (earlier !== undefined) port.postMessage({ count: done, error: earlier })
    else {
      try {
        const fd = numbers[slot * 4 + 1]
        const offset = numbers[slot * 4 + 2]
        let written = 0
        while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written, offset + written)
      } catch (error) {
        failed.set(file, { code: error.code, message: "an earlier write to this file failed: " + error.message })
        port.postMessage({ count: done, error: { code: error.code, message: error.message } })
      }
    }
  }
  done = (done + 1) | 0
  Atomics.store(control, 1, done)
  Atomics.notify(control, 1)
}
`

/** A failed write as the thread reports it: the system error's code and message. */
export class WriteFailure extends Error {
  constructor(
    readonly code: string | undefined,
    message: string,
  ) {
    super(message)
    this.name = "WriteFailure"
  }
}

interface Queued {
  readonly kind: number
  readonly file: number
  readonly fd: number
  readonly offset: number
  readonly bytes: Uint8Array | undefined
  readonly resolve: () => void
  readonly reject: (failure: WriteFailure) => void
}

interface InFlight {
  readonly file: number
  readonly ringStart: number
  readonly ringEnd: number
  readonly resolve: () => void
  readonly reject: (failure: WriteFailure) => void
}

const ignore = () => undefined

/** `Atomics.waitAsync` (Node 16+; not yet in TypeScript's ES2022 library). */
const waitAsync = (
  Atomics as unknown as {
    waitAsync: (
      array: Int32Array,
      index: number,
      value: number,
    ) => { readonly async: false; readonly value: string } | { readonly async: true; readonly value: Promise<string> }
  }
).waitAsync

/**
 * The thread and the memory it shares with the event loop. A write's bytes are copied once, into
 * the shared ring (or, when larger than the ring's free space allows, into a message the thread
 * takes synchronously), and the thread is woken with `Atomics.notify`; it announces each finished
 * write by advancing a shared counter, which the event loop awaits with `Atomics.waitAsync`.
 * Nothing is structured-cloned per write, and no message event runs on the event loop per write.
 */
class WriterThread {
  private readonly control = new Int32Array(new SharedArrayBuffer(8))
  private readonly numbers = new Float64Array(new SharedArrayBuffer(writerSlotsMax * 4 * 8))
  private readonly kinds = new Int32Array(new SharedArrayBuffer(writerSlotsMax * 2 * 4))
  private readonly ring = new Uint8Array(new SharedArrayBuffer(writerRingBytes))
  private readonly port: MessagePort
  private readonly worker: Worker
  /** Handed to the thread, oldest first; `queued` counts them all, `done` those answered. */
  private readonly inFlight: Array<InFlight> = []
  private inFlightHead = 0
  private queued = 0
  private done = 0
  /** Not yet handed to the thread (no slot or no ring space yet), in queue order. */
  private readonly waiting: Array<Queued> = []
  private ringNext = 0
  private listening = false
  /** A failure the thread reported (by message, in count order) and `settle` has not reached yet. */
  private pendingFailure: { count: number; error: { code?: string; message: string } } | undefined
  stopped = false

  constructor(private readonly onFailed: (files: Iterable<number>) => void) {
    const { port1, port2 } = new MessageChannel()
    this.port = port1
    this.worker = new Worker(threadSource, {
      eval: true,
      workerData: {
        port: port2,
        slotsMax: writerSlotsMax,
        control: this.control.buffer,
        numbers: this.numbers.buffer,
        kinds: this.kinds.buffer,
        ring: this.ring.buffer,
      },
      transferList: [port2],
    })
    keepV8FlagsAcross(this.worker)
    this.worker.unref()
    const stop = (why: string) => {
      if (this.stopped) return
      this.stopped = true
      const cut = [...this.inFlight.slice(this.inFlightHead), ...this.waiting]
      this.inFlight.length = 0
      this.waiting.length = 0
      this.onFailed(cut.map((entry) => entry.file))
      for (const entry of cut) entry.reject(new WriteFailure(undefined, `the WAL writer thread stopped: ${why}`))
    }
    this.worker.on("error", (error) => stop(error.message))
    this.worker.on("exit", (code) => stop(`exit code ${code}`))
  }

  write(file: number, fd: number, offset: number, bytes: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ kind: slotWrite, file, fd, offset, bytes, resolve, reject })
      this.handOver()
    })
  }

  forget(file: number): void {
    if (this.stopped) return
    this.waiting.push({ kind: slotForget, file, fd: 0, offset: 0, bytes: undefined, resolve: ignore, reject: ignore })
    this.handOver()
  }

  terminate(): Promise<number> {
    return this.worker.terminate()
  }

  /** Where `length` bytes fit in the ring after the writes still in flight, if they do. */
  private ringPlace(length: number): number | undefined {
    const oldest = this.inFlight[this.inFlightHead]
    if (oldest === undefined) this.ringNext = 0
    const oldestStart = oldest?.ringStart ?? 0
    // In use: [oldestStart, ringNext), or, wrapped, [oldestStart, end) and [0, ringNext). A wrapped
    // ring never fills up to oldestStart, so ringNext === oldestStart means nothing is in use.
    if (oldest !== undefined && this.ringNext < oldestStart)
      return this.ringNext + length < oldestStart ? this.ringNext : undefined
    if (this.ringNext + length <= writerRingBytes) return this.ringNext
    return length < oldestStart ? 0 : undefined
  }

  /** Hands waiting writes to the thread while it has slots for them, in order. */
  private handOver(): void {
    if (this.stopped) return
    let handed = false
    while (this.waiting.length > 0 && ((this.queued - this.done) | 0) < writerSlotsMax) {
      const next = this.waiting[0]!
      const length = next.bytes?.byteLength ?? 0
      let kind = next.kind
      let ringStart = this.ringNext
      if (kind === slotWrite && length > 0) {
        const place = length <= writerRingBytes / 4 ? this.ringPlace(length) : undefined
        if (place === undefined) {
          // Too large for the ring's free space: a copy in a message, taken by the thread in order.
          if (length <= writerRingBytes / 4 && this.inFlightHead !== this.inFlight.length) break
          const copy = new Uint8Array(length)
          copy.set(next.bytes!)
          this.port.postMessage(copy, [copy.buffer])
          kind = slotLargeWrite
        } else {
          ringStart = place
          this.ring.set(next.bytes!, place)
          this.ringNext = place + length
        }
      }
      this.waiting.shift()
      const slot = (this.queued >>> 0) % writerSlotsMax
      this.numbers[slot * 4] = next.file
      this.numbers[slot * 4 + 1] = next.fd
      this.numbers[slot * 4 + 2] = next.offset
      this.numbers[slot * 4 + 3] = length
      this.kinds[slot * 2] = kind
      this.kinds[slot * 2 + 1] = ringStart
      const ringEnd = kind === slotWrite ? ringStart + length : ringStart
      this.inFlight.push({ file: next.file, ringStart, ringEnd, resolve: next.resolve, reject: next.reject })
      this.queued = (this.queued + 1) | 0
      handed = true
    }
    if (!handed) return
    Atomics.store(this.control, 0, this.queued)
    Atomics.notify(this.control, 0)
    this.listen()
  }

  /** Waits (without blocking) for the thread to finish the oldest write in flight. */
  private listen(): void {
    if (this.listening || this.queued === this.done) return
    this.listening = true
    this.worker.ref()
    const waited = waitAsync(this.control, 1, this.done)
    if (waited.async) void waited.value.then(() => this.settle())
    else queueMicrotask(() => this.settle())
  }

  /** Answers every write the thread finished, then hands over what was waiting for room. */
  private settle(): void {
    this.listening = false
    if (this.stopped) return
    const done = Atomics.load(this.control, 1)
    while (this.done !== done) {
      const entry = this.inFlight[this.inFlightHead]!
      this.inFlight[this.inFlightHead++] = undefined as never
      const failure = this.failureOf(this.done)
      this.done = (this.done + 1) | 0
      if (failure === undefined) entry.resolve()
      else {
        // Remembered here too, not only by the thread: a thread started after this one stops must
        // refuse the file as well.
        this.onFailed([entry.file])
        entry.reject(failure)
      }
    }
    if (this.inFlightHead === this.inFlight.length) {
      this.inFlight.length = 0
      this.inFlightHead = 0
    }
    this.handOver()
    if (this.queued === this.done) this.worker.unref()
    else this.listen()
  }

  /** The failure the thread reported for the write of count `count`, if any (in count order). */
  private failureOf(count: number): WriteFailure | undefined {
    this.pendingFailure ??= receiveMessageOnPort(this.port)?.message
    if (this.pendingFailure === undefined || this.pendingFailure.count !== count) return undefined
    const { error } = this.pendingFailure
    this.pendingFailure = undefined
    return new WriteFailure(error.code, error.message)
  }
}

let thread: WriterThread | undefined
/**
 * Files with a failed write, or with writes cut off when the thread stopped: refused until
 * forgotten (see above), whichever thread is running.
 */
const refused = new Set<number>()
let nextFile = 0

/** A number naming one open file to the writer thread (its descriptor may be reused after close). */
export const fileToken = (): number => nextFile++

/**
 * Queues a durable write of `bytes` at `offset` of descriptor `fd` (opened `O_DSYNC`) for `file`;
 * resolves once they are durable, rejects with a `WriteFailure`.
 */
export const queueWrite = (file: number, fd: number, offset: number, bytes: Uint8Array): Promise<void> => {
  if (refused.has(file)) {
    return Promise.reject(
      new WriteFailure(undefined, "an earlier write to this file failed, or was cut off with the WAL writer thread"),
    )
  }
  if (thread === undefined || thread.stopped) {
    thread = new WriterThread((files) => {
      for (const stoppedFile of files) refused.add(stoppedFile)
    })
  }
  return thread.write(file, fd, offset, bytes)
}

/** Ends the writer thread as a crash would (its waiting writes fail); for tests. */
export const terminateWriterThread = async (): Promise<void> => {
  await thread?.terminate()
}

/** Forgets `file` (closed after its writes settled): its token is never used again. */
export const forgetFile = (file: number): void => {
  refused.delete(file)
  thread?.forget(file)
}
