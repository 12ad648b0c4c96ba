/**
 * Where each store's log lives: segment files in the store's directory (the default, zero setup), or
 * a NATS JetStream stream that several daemons share (JetStreamWal.ts, `mnemos serve --nats`). The
 * store kernel opens its log through this service and depends on nothing else of either.
 */
import { Context, Effect } from "effect"
import { openLocalWal } from "./FileWal.ts"
import type { OpenedWal, WalError } from "./Wal.ts"
import { WalFs } from "./WalFs.ts"

/** What a store asks for when it opens its log. */
export interface LogOpenOptions {
  /** The store's name (a shared log's stream is named after it). */
  readonly store: string
  /** The store's directory: a file log lives in `wal/` under it. */
  readonly dir: string
  readonly segmentBytesMax: number
  readonly preallocateBytes: number
  /** Records at or below this sequence are applied; only later ones are replayed. */
  readonly replayAfterSeq: number
  /** A shared log: the position of the last batch the checkpoint holds (replay starts after it). */
  readonly replayAfterPosition: number | undefined
  /** The store generation the checkpoint knows; a log of another generation is refused. */
  readonly salt: number | undefined
  /** A file log: cut every record above this sequence (a failed batch's rollback). */
  readonly discardAfterSeq: number | undefined
  /** A file log: the snapshot record type (see FileWal.ts). */
  readonly snapshotRecordType: number
}

/** Opens stores' logs. */
export class StoreLogs extends Context.Service<
  StoreLogs,
  {
    readonly open: (options: LogOpenOptions) => Effect.Effect<OpenedWal, WalError>
    /** True when the logs are shared with other daemons. */
    readonly shared: boolean
  }
>()("mnemos/stores/StoreLogs") {}

/** Every store's log in segment files under its directory, through `fs`. */
export const fileLogsOver = (fs: WalFs["Service"]): StoreLogs["Service"] =>
  StoreLogs.of({
    shared: false,
    open: (options) =>
      openLocalWal({
        dir: `${options.dir}/wal`,
        segmentBytesMax: options.segmentBytesMax,
        preallocateBytes: options.preallocateBytes,
        replayAfterSeq: options.replayAfterSeq,
        ...(options.salt !== undefined ? { salt: options.salt } : {}),
        ...(options.discardAfterSeq !== undefined ? { discardAfterSeq: options.discardAfterSeq } : {}),
        snapshotRecordType: options.snapshotRecordType,
      }).pipe(Effect.provideService(WalFs, fs)),
  })

/**
 * The logs a store uses: the `StoreLogs` provided (JetStream, in a shared memory), else file logs
 * over `WalFs`, which is the default everywhere else.
 */
export const storeLogs: Effect.Effect<StoreLogs["Service"], never, WalFs> = Effect.gen(function* () {
  const provided = yield* Effect.serviceOption(StoreLogs)
  return provided._tag === "Some" ? provided.value : fileLogsOver(yield* WalFs)
})
