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
 * The thread is started on the first write. It keeps the process alive only while writes are
 * waiting for it, as a pending libuv request would.
 */
import { Worker } from "node:worker_threads"

/** The thread's code (CommonJS, evaluated: no file to locate in dist/ or under the test runner). */
const threadSource = `
const { parentPort } = require("node:worker_threads")
const { writeSync } = require("node:fs")
const failed = new Map()
parentPort.on("message", (message) => {
  if (message.forget !== undefined) {
    failed.delete(message.forget)
    return
  }
  const { id, file, fd, offset, bytes } = message
  const earlier = failed.get(file)
  if (earlier !== undefined) {
    parentPort.postMessage({ id, error: earlier })
    return
  }
  try {
    let done = 0
    while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done, offset + done)
    parentPort.postMessage({ id })
  } catch (error) {
    const reported = { code: error.code, message: "an earlier write to this file failed: " + error.message }
    failed.set(file, reported)
    parentPort.postMessage({ id, error: { code: error.code, message: error.message } })
  }
})
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

interface Waiting {
  readonly file: number
  readonly resolve: () => void
  readonly reject: (failure: WriteFailure) => void
}

class WriterThread {
  private readonly worker = new Worker(threadSource, { eval: true })
  private readonly waiting = new Map<number, Waiting>()
  private nextId = 0
  stopped = false

  constructor(private readonly onFailed: (files: Iterable<number>) => void) {
    this.worker.unref()
    this.worker.on("message", ({ id, error }: { id: number; error?: { code?: string; message: string } }) => {
      const waiting = this.waiting.get(id)
      if (waiting === undefined) return
      this.waiting.delete(id)
      if (this.waiting.size === 0) this.worker.unref()
      if (error === undefined) waiting.resolve()
      else {
        // Remembered here too, not only by the thread: a thread started after this one stops must
        // refuse the file as well.
        this.onFailed([waiting.file])
        waiting.reject(new WriteFailure(error.code, error.message))
      }
    })
    const stop = (why: string) => {
      if (this.stopped) return
      this.stopped = true
      const waiting = [...this.waiting.values()]
      this.waiting.clear()
      this.onFailed(waiting.map((entry) => entry.file))
      for (const entry of waiting) entry.reject(new WriteFailure(undefined, `the WAL writer thread stopped: ${why}`))
    }
    this.worker.on("error", (error) => stop(error.message))
    this.worker.on("exit", (code) => stop(`exit code ${code}`))
  }

  write(file: number, fd: number, offset: number, bytes: Uint8Array): Promise<void> {
    // A copy the thread takes over (no bytes are cloned twice, and the caller may reuse its buffer).
    const copy = new Uint8Array(bytes.byteLength)
    copy.set(bytes)
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      if (this.waiting.size === 0) this.worker.ref()
      this.waiting.set(id, { file, resolve, reject })
      this.worker.postMessage({ id, file, fd, offset, bytes: copy }, [copy.buffer])
    })
  }

  forget(file: number): void {
    if (!this.stopped) this.worker.postMessage({ forget: file })
  }

  terminate(): Promise<number> {
    return this.worker.terminate()
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
