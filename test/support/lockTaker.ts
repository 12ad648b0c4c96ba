/**
 * A process that takes a data directory's lock (test/stores/DataDir.test.ts starts several at once):
 * `lockTaker.ts <dir>` prints `ACQUIRED <pid>` and holds the lock until its stdin ends, or prints
 * `REFUSED <message>` when the lock is not its to take.
 */
import { Effect } from "effect"
import { lockDataDir } from "../../src/stores/datadir/DataDir.ts"

const dir = process.argv[2]!
const stdinEnds = new Promise<void>((resolve) => {
  process.stdin.on("end", resolve).resume()
})
const exit = await Effect.runPromiseExit(
  Effect.scoped(
    Effect.gen(function* () {
      yield* lockDataDir(dir, "lock taker")
      process.stdout.write(`ACQUIRED ${process.pid}\n`)
      yield* Effect.promise(() => stdinEnds)
    }),
  ),
)
if (exit._tag === "Failure") process.stdout.write(`REFUSED ${String(exit.cause)}\n`)
process.exit(0)
