/**
 * One "daemon" of the cluster benchmark, in a process of its own: a store actor (the kernel's test
 * key/value store) on JetStream logs — or on its file log, for the comparison — with `writers`
 * concurrent writers for `seconds`. Reports, as one JSON line on stdout: acknowledged writes, their
 * latencies, and for every event other daemons wrote, how long after its commit it was applied here
 * (replication lag). With `catchUp`, it only opens a fresh replica and times the catch-up.
 *
 * On JetStream, `mode` says who decides the store's writes:
 *   - "lease" (the default): as a daemon of a shared memory does (src/actors/Router.ts): the write
 *     routing of src/cluster/WriterLeases.ts gates the store actor (`writeGate`), and the writers
 *     send through `routing.route(...)` — decided here while this daemon holds the store's writer
 *     lease, forwarded to the holder otherwise;
 *   - "optimistic": every daemon appends itself, fenced by expected-last-sequence (mnemos before the
 *     writer lease; kept only as a comparison here).
 * The daemons here publish no presence heartbeats (Presence.ts needs the whole daemon), so each
 * counts itself the only live one: the lease goes to whichever daemon's compare-and-set lands first
 * and is never handed over — the steady state a real cluster reaches once its leases are spread.
 *
 * Start-up handshake: once open (and, with the lease, once a holder of the lease is known), the
 * daemon prints `{"ready":...}` on stdout and waits for one line on stdin, `{"startAt": <epoch ms>}`;
 * every writer starts then, so slow process starts on a loaded machine never shorten a run.
 *
 * argv: JSON { servers?, prefix?, daemonId, writers, seconds, catchUp?, count?, valueBytes, mode? }
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { createInterface } from "node:readline"
import { Effect, Layer, PubSub } from "effect"
import { defaultStoreOptions, makeStore } from "../src/actors/StoreActor.ts"
import { makeWriterLeases } from "../src/cluster/WriterLeases.ts"
import * as EventBus from "../src/stores/EventBus.ts"
import * as Nats from "../src/stores/shared/Nats.ts"
import { jetStreamLogs } from "../src/stores/wal/JetStreamWal.ts"
import { layerNode } from "../src/stores/wal/WalFs.ts"
import { kvStore } from "../test/support/KvStore.ts"

/** What the parent (bench/cluster.ts) asks of this daemon. */
export interface Job {
  readonly servers?: ReadonlyArray<string>
  readonly prefix?: string
  readonly daemonId: string
  readonly writers: number
  readonly seconds: number
  readonly catchUp?: boolean
  /** Stop once this many writes are acknowledged (filling a stream for the catch-up). */
  readonly count?: number
  readonly valueBytes: number
  /** Who decides the writes on JetStream (default "lease"). */
  readonly mode?: "lease" | "optimistic"
}

/** How long a daemon waits for its store's writer lease to have a holder before it gives up. */
const holderTimeoutMs = 30_000

const job = JSON.parse(process.argv[2]!) as Job
const mode = job.mode ?? "lease"
const dir = mkdtempSync(join(tmpdir(), "mnemos-bench-daemon-"))
// Removed however the process ends (a daemon that fails leaves no data directory behind).
process.once("exit", () => rmSync(dir, { recursive: true, force: true }))
const shared =
  job.servers === undefined
    ? Layer.empty
    : jetStreamLogs.pipe(
        Layer.provideMerge(Nats.layer({ servers: job.servers, prefix: job.prefix!, daemonId: job.daemonId })),
      )

/** The start time the bench sends on stdin once every daemon is ready. */
const startAtLine = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const lines = createInterface({ input: process.stdin })
    lines.once("line", (line) => {
      resolve((JSON.parse(line) as { startAt: number }).startAt)
      lines.close()
    })
    lines.once("close", () => reject(new Error("stdin closed before the start time came")))
  })

const program = Effect.gen(function* () {
  const bus = yield* EventBus.EventBus
  const events = yield* bus.subscribe
  const nats = yield* Effect.serviceOption(Nats.Nats)
  const definition = kvStore("bench")
  // As Router.ts wires a store of a shared memory: the gate into the actor, the route around it.
  const routing =
    nats._tag === "Some" && mode === "lease"
      ? yield* makeWriterLeases.pipe(Effect.provideService(Nats.Nats, nats.value))
      : undefined
  const openedAt = performance.now()
  const actor = yield* makeStore(definition, {
    ...defaultStoreOptions,
    dir,
    ...(routing !== undefined ? { writeGate: routing.gate(definition.name) } : {}),
  })
  const store = routing !== undefined ? routing.route(definition, actor) : actor
  yield* store.read(() => undefined) // opened: caught up with the stream
  const openMs = performance.now() - openedAt
  if (job.catchUp === true) {
    const records = store.health().wal?.nextSeq ?? 1
    return { openMs, records: records - 1 }
  }
  // With the lease: no writer starts before a holder is known (else the first writes wait for it).
  const holderSince = performance.now()
  while (routing !== undefined && store.health().writer?.holder === undefined) {
    if (performance.now() - holderSince > holderTimeoutMs)
      return yield* Effect.die(new Error(`no daemon took the writer lease within ${holderTimeoutMs} ms`))
    yield* Effect.sleep("20 millis")
  }
  const holderWaitMs = performance.now() - holderSince
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
  process.stdout.write(`${JSON.stringify({ ready: job.daemonId, openMs, holderWaitMs })}\n`)
  const startAt = yield* Effect.promise(startAtLine)
  const value = "v".repeat(job.valueBytes)
  yield* Effect.sleep(Math.max(0, startAt - Date.now()))
  const lateMs = Math.max(0, Date.now() - startAt)
  // How long the event loop was held up (a renewal of the lease, an answer, waits for it).
  const loopDelay = monitorEventLoopDelay({ resolution: 10 })
  loopDelay.enable()
  const until = startAt + job.seconds * 1000
  const latencies: Array<number> = []
  let failures = 0
  const failureMessages = new Map<string, number>()
  yield* Effect.forEach(
    Array.from({ length: job.writers }, (_, writer) => writer),
    (writer) =>
      Effect.gen(function* () {
        for (let i = 0; Date.now() < until && latencies.length < (job.count ?? Number.POSITIVE_INFINITY); i++) {
          const started = performance.now()
          const exit = yield* Effect.exit(store.send({ _tag: "Put", key: `${job.daemonId}-${writer}-${i}`, value }))
          if (exit._tag === "Success") latencies.push(performance.now() - started)
          else {
            failures++
            const message = String(exit.cause).slice(0, 300)
            failureMessages.set(message, (failureMessages.get(message) ?? 0) + 1)
          }
        }
      }),
    { concurrency: "unbounded" },
  )
  loopDelay.disable()
  yield* Effect.sleep("1 second") // let the last remote events arrive
  const health = store.health()
  return {
    daemonId: job.daemonId,
    mode: routing !== undefined ? "lease" : nats._tag === "Some" ? "optimistic" : "file",
    openMs,
    holderWaitMs,
    lateMs,
    loopDelayP99Ms: loopDelay.percentile(99) / 1e6,
    loopDelayMaxMs: loopDelay.max / 1e6,
    acked: latencies.length,
    failures,
    failureMessages: Object.fromEntries([...failureMessages].slice(0, 5)),
    latencies,
    lags,
    seconds: job.seconds,
    appends: health.wal?.appends ?? 0,
    refused: health.wal?.refused ?? 0,
    ...(health.writer !== undefined
      ? {
          holder: health.writer.holder,
          self: health.writer.self,
          forwarded: health.writer.forwarded,
          served: health.writer.served,
        }
      : {}),
  }
})

const result = await Effect.runPromise(
  program.pipe(Effect.scoped, Effect.provide(Layer.mergeAll(shared, EventBus.layer, layerNode))),
)
// Exit only once the (large) line is flushed: a pipe takes it in pieces.
process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0))
