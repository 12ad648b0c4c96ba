/**
 * The child process of the kill -9 test (test/stores/KillNine.test.ts).
 *
 *   node --import tsx test/support/killNineChild.ts <dataDir> <round>
 *
 * Opens the KV store in `<dataDir>` on the real disk and runs a write storm that never ends by
 * itself: `writers` fibers, each putting unique keys `r<round>-w<fiber>-<n>` with the value
 * `expectedValue(key)`. After each acknowledged write it prints the key on a line of its own, with a
 * synchronous write to fd 1, so the parent never sees a key whose write was not acknowledged.
 * The parent SIGKILLs it at a random moment. Any failure is printed to stderr with exit code 1.
 */
import { writeSync } from "node:fs"
import { Effect, Layer } from "effect"
import { defaultStoreOptions, makeStore } from "../../src/actors/StoreActor.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import { layerNode } from "../../src/stores/wal/WalFs.ts"
import { kvStore } from "./KvStore.ts"

export const writers = 16

/** The value a key is written with; the parent checks it after recovery. */
export const expectedValue = (key: string): string => `value-of-${key}`

/** Small segments and frequent checkpoints, so kills also land in rotation and segment release. */
export const childStoreOptions = {
  ...defaultStoreOptions,
  walSegmentBytesMax: 16 * 1024,
  checkpointRecordsInterval: 400,
}

/** Writes all of `line` to stdout synchronously, retrying while a non-blocking pipe is full. */
const writeLine = (line: string): void => {
  const bytes = Buffer.from(line, "utf8")
  let done = 0
  while (done < bytes.length) {
    try {
      done += writeSync(1, bytes, done, bytes.length - done)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error
    }
  }
}

const main = (dir: string, round: string) =>
  Effect.gen(function* () {
    const store = yield* makeStore(kvStore(), { ...childStoreOptions, dir })
    const writer = (fiber: number) =>
      Effect.gen(function* () {
        for (let n = 0; ; n++) {
          const key = `r${round}-w${fiber}-${n}`
          yield* store.send({ _tag: "Put", key, value: expectedValue(key) })
          writeLine(`${key}\n`)
        }
      })
    yield* Effect.forEach(
      Array.from({ length: writers }, (_, fiber) => fiber),
      writer,
      { concurrency: "unbounded", discard: true },
    )
  }).pipe(Effect.scoped, Effect.provide(Layer.merge(EventBus.layer, layerNode)))

const [dir, round] = process.argv.slice(2)
if (dir !== undefined && round !== undefined && process.argv[1]?.endsWith("killNineChild.ts")) {
  Effect.runPromise(main(dir, round)).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(
        `killNineChild failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      )
      process.exit(1)
    },
  )
}
