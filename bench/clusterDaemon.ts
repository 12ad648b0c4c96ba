/**
 * One "daemon" of the cluster benchmark, in a process of its own: a store actor (the kernel's test
 * key/value store) on JetStream logs — or on its file log, for the comparison — with `writers`
 * concurrent writers for `seconds`. Reports, as one JSON line on stdout: acknowledged writes, their
 * latencies, and for every event other daemons wrote, how long after its commit it was applied here
 * (replication lag). With `catchUp`, it only opens a fresh replica and times the catch-up.
 *
 * argv: JSON { servers?, prefix?, daemonId, writers, seconds, startAt, catchUp?, count?, valueBytes }
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer, PubSub } from "effect"
import { defaultStoreOptions, makeStore } from "../src/actors/StoreActor.ts"
import * as EventBus from "../src/stores/EventBus.ts"
import * as Nats from "../src/stores/shared/Nats.ts"
import { jetStreamLogs } from "../src/stores/wal/JetStreamWal.ts"
import { layerNode } from "../src/stores/wal/WalFs.ts"
import { kvStore } from "../test/support/KvStore.ts"

interface Job {
  readonly servers?: ReadonlyArray<string>
  readonly prefix?: string
  readonly daemonId: string
  readonly writers: number
  readonly seconds: number
  /** Wall-clock time (ms) at which every daemon starts writing. */
  readonly startAt: number
  readonly catchUp?: boolean
  /** Stop once this many writes are acknowledged (filling a stream for the catch-up). */
  readonly count?: number
  readonly valueBytes: number
}

const job = JSON.parse(process.argv[2]!) as Job
const dir = mkdtempSync(join(tmpdir(), "mnemos-bench-daemon-"))
const shared =
  job.servers === undefined
    ? Layer.empty
    : jetStreamLogs.pipe(
        Layer.provideMerge(Nats.layer({ servers: job.servers, prefix: job.prefix!, daemonId: job.daemonId })),
      )

const program = Effect.gen(function* () {
  const bus = yield* EventBus.EventBus
  const events = yield* bus.subscribe
  const openedAt = performance.now()
  const store = yield* makeStore(kvStore("bench"), { ...defaultStoreOptions, dir })
  yield* store.read(() => undefined) // opened: caught up with the stream
  const openMs = performance.now() - openedAt
  if (job.catchUp === true) {
    const records = store.health().wal?.nextSeq ?? 1
    return { openMs, records: records - 1 }
  }
  // Replication lag: events other daemons committed, applied here (same machine, same clock).
  const lags: Array<number> = []
  yield* Effect.forkScoped(
    Effect.forever(
      Effect.map(PubSub.takeAll(events), (batch) => {
        const now = Date.now()
        for (const committed of batch) if (committed.origin !== undefined) lags.push(now - committed.at)
      }),
    ),
  )
  const value = "v".repeat(job.valueBytes)
  yield* Effect.sleep(Math.max(0, job.startAt - Date.now()))
  const until = Date.now() + job.seconds * 1000
  const latencies: Array<number> = []
  let failures = 0
  yield* Effect.forEach(
    Array.from({ length: job.writers }, (_, writer) => writer),
    (writer) =>
      Effect.gen(function* () {
        for (let i = 0; Date.now() < until && latencies.length < (job.count ?? Number.POSITIVE_INFINITY); i++) {
          const started = performance.now()
          const exit = yield* Effect.exit(store.send({ _tag: "Put", key: `${job.daemonId}-${writer}-${i}`, value }))
          if (exit._tag === "Success") latencies.push(performance.now() - started)
          else failures++
        }
      }),
    { concurrency: "unbounded" },
  )
  yield* Effect.sleep("1 second") // let the last remote events arrive
  const wal = store.health().wal
  return {
    openMs,
    acked: latencies.length,
    failures,
    latencies,
    lags,
    seconds: job.seconds,
    appends: wal?.appends ?? 0,
    refused: wal?.refused ?? 0,
  }
})

const result = await Effect.runPromise(
  program.pipe(Effect.scoped, Effect.provide(Layer.mergeAll(shared, EventBus.layer, layerNode))),
)
rmSync(dir, { recursive: true, force: true })
// Exit only once the (large) line is flushed: a pipe takes it in pieces.
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0))
