/**
 * The search thread: the index core (IndexCore.ts) on a thread of its own, so full-text indexing,
 * embedding and search's own persistence never hold the event loop that the stores and the
 * transports share. The indexer on the main thread (Indexer.ts) drives it by messages.
 *
 * Protocol: requests arrive in order and are handled in that order, one after another, so a
 * search sent after a group replacement sees it (read-your-writes for the session that wrote).
 * `apply` and `setSeq` are not answered; every other request carries an `id` and is answered
 * `{ id, ok, value | error }`. Two requests run in the background instead, answered when done
 * while later requests are handled meanwhile: `load` (reading what was persisted, in slices) and
 * `embedMissing` (warm-up's last step) — searches are answered while a large index loads.
 * `close` flushes search's persistence and ends the thread.
 *
 * `openSearchThread` starts it in a worker thread, or, with `thread: false`, serves the same
 * protocol in the calling thread over a `MessageChannel` (structured clones included): the same
 * code path, for commands that would gain nothing from a second thread.
 */
import { MessageChannel, type MessagePort, parentPort } from "node:worker_threads"
import { Cause, Duration, Effect, Exit, Logger, Queue } from "effect"
import { startIdleCollection } from "../../runtime/IdleHeap.ts"
import { type EmbedderConfig, layer as embedderLayer } from "../embedding/Embedder.ts"
import {
  type CoreConfig,
  type CoreSearchResult,
  type CoreStats,
  makeIndexCore,
  type SearchRequest,
  type TickAfter,
} from "../index/IndexCore.ts"
import type { GroupDocuments, SearchDocument } from "../index/SearchDocument.ts"
import type { Timeline } from "../index/SearchIndex.ts"
import { startModuleWorker } from "./WorkerModule.ts"

/**
 * The search thread's young generation, in MiB (V8's default is sized for throughput, ~16–32). A
 * small daemon keeps 10–20 MiB less resident with it, at the same CPU; at 20,000 entities neither
 * changes beyond the noise (docs/benchmarks.md, footprint). Halved to 4 MiB, with the tokenizer's
 * ASCII path halving what the thread allocates, the 10k graph workload's peak fell a few MiB at the
 * median inside a spread of 20, for collections twice as often: not taken (docs/benchmarks.md,
 * "Measured and not taken (issue 28, 2026-12-05, tenth session)"). The thread starts with all of
 * it, which the daemon's hold then keeps (YoungGeneration.ts).
 */
export const searchThreadYoungGenerationMb = 8

/** How the thread is set up (structured-cloneable: it is the worker's `workerData`). */
export interface ThreadConfig extends CoreConfig {
  readonly embedder: EmbedderConfig
}

/** What each answered request answers. */
export interface ThreadAnswers {
  readonly load: Readonly<Record<string, number>>
  readonly replace: null
  readonly groupsOf: ReadonlyArray<string>
  readonly embedMissing: null
  readonly search: CoreSearchResult
  readonly documents: ReadonlyArray<SearchDocument | undefined>
  readonly timeline: ReadonlyArray<Timeline | undefined>
  readonly stats: CoreStats
  readonly count: number
  readonly compact: { readonly bytesBefore: number; readonly bytesAfter: number }
  readonly close: null
}

/** A request that is answered, without its id. */
export type ThreadCall =
  | { readonly op: "load" }
  | { readonly op: "replace"; readonly store: string; readonly groups: ReadonlyArray<GroupDocuments> }
  | { readonly op: "groupsOf"; readonly store: string }
  | { readonly op: "embedMissing" }
  | { readonly op: "search"; readonly request: SearchRequest; readonly now: number }
  | { readonly op: "documents"; readonly ids: ReadonlyArray<string> }
  | { readonly op: "timeline"; readonly ids: ReadonlyArray<string>; readonly window: number }
  | { readonly op: "stats" }
  /** The documents held: what placing the index needs, without the cost of `stats` (its memory figures). */
  | { readonly op: "count" }
  | { readonly op: "compact" }
  | { readonly op: "close" }

/** A request that is not answered. */
export type ThreadPost =
  | {
      readonly op: "apply"
      readonly store: string
      readonly groups: ReadonlyArray<GroupDocuments>
      /** The store's last sequence these changes reflect. */
      readonly seq: number
      /** How many events they come from. */
      readonly events: number
      /** Commit time of the first of them (ms since the epoch). */
      readonly at: number
    }
  | { readonly op: "setSeq"; readonly store: string; readonly seq: number }

type ThreadRequest = (ThreadCall & { readonly id: number }) | ThreadPost

type ThreadReply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: string }

/** How often the thread does background work (documents that waited for the model, ANN steps). */
export const tickIntervalMs = 25

/**
 * The background work's wait between two ticks: none while work is left (the ticks are
 * `tickIntervalMs` apart), else until the time the core named or until a request has been
 * handled, whichever is first; with no time named, only the latter. An idle thread is not woken
 * every few milliseconds: an idle daemon then spends no CPU on search, and V8 can give back the
 * heap it no longer uses (docs/benchmarks.md, footprint).
 */
const makeBackgroundWait = () => {
  let wake: (() => void) | undefined
  return {
    /** A request was handled: the work it may have left is looked at now. */
    handled: (): void => wake?.(),
    wait: (after: TickAfter): Effect.Effect<void> =>
      after === "soon"
        ? Effect.void
        : Effect.callback<void>((resume) => {
            const done = () => {
              wake = undefined
              clearTimeout(timer)
              resume(Effect.void)
            }
            const timer = after === "idle" ? undefined : setTimeout(done, Math.max(0, after - tickIntervalMs))
            wake = done
            return Effect.sync(() => {
              clearTimeout(timer)
              if (wake === done) wake = undefined
            })
          }),
  }
}

const logFailure = (what: string) => (cause: Cause.Cause<unknown>) =>
  Effect.logWarning(`search thread: ${what} failed: ${Cause.pretty(cause)}`)

/** Serves the protocol on `port` until `close`; resolves when the thread's resources are released. */
export const serveIndex = (port: MessagePort, config: ThreadConfig): Promise<void> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const core = yield* makeIndexCore(config)
      const inbox = yield* Queue.unbounded<ThreadRequest>()
      port.on("message", (request: ThreadRequest) => Queue.offerUnsafe(inbox, request))
      const answer = (id: number, exit: Exit.Exit<unknown, unknown>) =>
        port.postMessage(
          (Exit.isSuccess(exit)
            ? { id, ok: true, value: exit.value }
            : { id, ok: false, error: Cause.pretty(exit.cause) }) satisfies ThreadReply,
        )
      const background = makeBackgroundWait()
      const inBackground = (id: number, effect: Effect.Effect<unknown>) =>
        Effect.forkScoped(
          Effect.exit(effect).pipe(
            Effect.flatMap((exit) =>
              Effect.sync(() => {
                answer(id, exit)
                background.handled()
              }),
            ),
          ),
        )
      yield* Effect.forkScoped(
        Effect.forever(
          Effect.sleep(Duration.millis(tickIntervalMs)).pipe(
            Effect.andThen(core.tick),
            Effect.catchCause((cause) => Effect.as(logFailure("background work")(cause), "soon" as const)),
            Effect.flatMap(background.wait),
          ),
        ),
      )
      while (true) {
        // The request before this one has been handled: it may have left background work.
        background.handled()
        const request = yield* Queue.take(inbox)
        switch (request.op) {
          // Unanswered: a failure is logged, and the thread goes on (the indexer's next reconcile
          // of that store, or a restart, makes the index whole again).
          case "apply":
            yield* core
              .apply(request.store, request.groups, request.seq, request.events, request.at)
              .pipe(Effect.catchCause(logFailure(`indexing ${request.store} to ${request.seq}`)))
            continue
          case "setSeq":
            yield* core.setSeq(request.store, request.seq).pipe(Effect.catchCause(logFailure("setSeq")))
            continue
          case "load":
            yield* inBackground(request.id, core.load)
            continue
          case "embedMissing":
            yield* inBackground(request.id, Effect.as(core.embedMissing, null))
            continue
          case "close":
            // Answered after the scope closes (persistence flushed), below.
            return request.id
        }
        const exit = yield* Effect.exit(handle(core, request))
        answer(request.id, exit)
      }
    }).pipe(
      Effect.scoped,
      // Logs go to stderr, as the daemon's own do: stdout may be an MCP stdio channel.
      Effect.provideService(Logger.LogToStderr, true),
      Effect.provide(embedderLayer({ ...config.embedder, ...(config.dataDir ? { dataDir: config.dataDir } : {}) })),
      Effect.flatMap((closeId) =>
        Effect.sync(() => {
          port.postMessage({ id: closeId, ok: true, value: null } satisfies ThreadReply)
          port.close()
        }),
      ),
    ),
  )

type Core = Effect.Success<ReturnType<typeof makeIndexCore>>

const handle = (core: Core, request: ThreadCall): Effect.Effect<unknown> => {
  switch (request.op) {
    case "replace":
      return Effect.as(core.replace(request.store, request.groups), null)
    case "groupsOf":
      return core.groupsOf(request.store)
    case "search":
      return core.search(request.request, request.now)
    case "documents":
      return core.documents(request.ids)
    case "timeline":
      return core.timeline(request.ids, request.window)
    case "stats":
      return core.stats
    case "count":
      return core.documentCount
    case "compact":
      return core.compact
    default:
      return Effect.die(new Error(`search thread: unknown request ${request.op}`))
  }
}

/** The search thread failed or ended. */
export class SearchThreadError extends Error {}

/** The main thread's end of the search thread. */
export interface SearchThread {
  /** Sends a request that is not answered (in order with every other). */
  readonly post: (request: ThreadPost) => void
  /** Sends a request and resolves with its answer. */
  readonly call: <C extends ThreadCall>(request: C) => Promise<ThreadAnswers[C["op"]]>
  /** Flushes search's persistence and ends the thread (waits at most `closeTimeoutMs`). */
  readonly close: () => Promise<void>
  /** Resolves with why the thread ended, once it has: closed, or failed. */
  readonly ended: Promise<Error>
  /** Stops the thread at once, without flushing (what a crash of it would do). */
  readonly terminate: () => Promise<void>
}

/** How long closing waits for the thread to flush before it is terminated. */
export const closeTimeoutMs = 30_000

/** Starts the search thread: a worker thread, or the calling thread when `thread` is false. */
export const openSearchThread = (config: ThreadConfig, thread = true): SearchThread => {
  const pending = new Map<number, { resolve: (value: never) => void; reject: (error: Error) => void }>()
  let nextId = 1
  let failure: Error | undefined
  const failAll = (error: Error) => {
    failure ??= error
    for (const waiter of pending.values()) waiter.reject(error)
    pending.clear()
  }
  const onReply = (reply: ThreadReply) => {
    const waiter = pending.get(reply.id)
    if (waiter === undefined) return
    pending.delete(reply.id)
    if (reply.ok) waiter.resolve(reply.value as never)
    else waiter.reject(new SearchThreadError(reply.error))
  }

  let send: (request: ThreadRequest) => void
  let terminate: () => Promise<unknown>
  let ended: Promise<void>
  if (thread) {
    const worker = startModuleWorker(import.meta.url, "SearchWorker", config, {
      maxYoungGenerationSizeMb: searchThreadYoungGenerationMb,
    })
    worker.on("message", onReply)
    worker.on("error", (error) => failAll(new SearchThreadError(`search thread failed: ${error.message}`)))
    ended = new Promise((resolve) =>
      worker.once("exit", (code) => {
        failAll(new SearchThreadError(`search thread exited (code ${code})`))
        resolve()
      }),
    )
    send = (request) => worker.postMessage(request)
    terminate = () => worker.terminate()
  } else {
    const { port1, port2 } = new MessageChannel()
    port1.on("message", onReply)
    const served = serveIndex(port2, config)
    ended = served.then(
      () => failAll(new SearchThreadError("search thread closed")),
      (error: unknown) => failAll(new SearchThreadError(`search thread failed: ${String(error)}`)),
    )
    send = (request) => port1.postMessage(request)
    terminate = () => {
      port1.close()
      return ended
    }
  }

  const call = <C extends ThreadCall>(request: C): Promise<ThreadAnswers[C["op"]]> =>
    new Promise((resolve, reject) => {
      if (failure !== undefined) return reject(failure)
      const id = nextId++
      pending.set(id, { resolve: resolve as (value: never) => void, reject })
      send({ ...request, id })
    })

  return {
    post: (request) => {
      if (failure === undefined) send(request)
    },
    call,
    ended: ended.then(() => failure ?? new SearchThreadError("search thread ended")),
    terminate: async () => {
      await terminate()
      await ended
    },
    close: async () => {
      if (failure !== undefined) return
      const closed = call({ op: "close" }).then(
        () => ended,
        () => undefined,
      )
      let timer: NodeJS.Timeout | undefined
      const timedOut = new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), closeTimeoutMs)
      })
      const outcome = await Promise.race([closed, timedOut])
      clearTimeout(timer)
      if (outcome === "timeout") await terminate()
    },
  }
}

/** The worker's entry (SearchWorker.ts): serves the protocol on the parent port. */
export const serveParent = (config: ThreadConfig): void => {
  if (parentPort === null) throw new Error("the search thread must run in a worker thread")
  // Its heap is collected when the daemon goes quiet, as the main thread's is (IdleHeap.ts).
  const stopIdleCollection = startIdleCollection()
  // A worker's parentPort is a MessagePort in all but its type.
  void serveIndex(parentPort as unknown as MessagePort, config).then(stopIdleCollection, (error: unknown) => {
    console.error(`mnemos search thread: ${String(error)}`)
    process.exit(1)
  })
}
