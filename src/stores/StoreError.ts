/**
 * Why a store could not serve a call, as opposed to a domain failure of the command itself:
 * - `WriteFailed`: the write failed (rolled back, or its fate decided when the store next opens);
 * - `DiskFull`: the disk holding the store is full (writes resume by themselves once it has room);
 * - `Unavailable`: the store cannot open or keeps failing;
 * - `Corrupt`: the store's log is damaged (see `mnemos repair`);
 * - `ShuttingDown`: the daemon is stopping;
 * - `TooLarge`: the command's records do not fit one batch of the store's log (a shared log's
 *   message size); it was not applied;
 * - `ReplyWithheld`: a retried command was applied before, but its reply was dropped by a
 *   compaction (it may have quoted deleted data); it is not applied again;
 * - `Unsupported`: the store cannot do this in its mode;
 * - `NotWriter`: in a shared memory, another daemon holds the store's writer lease (or none does
 *   yet); the command was not decided here, and the write routing (src/cluster/WriterLeases.ts)
 *   sends it to the holder.
 */
import { Schema } from "effect"

/** Why a store could not serve a call (as opposed to a domain failure of the command itself). */
export class StoreError extends Schema.TaggedError<StoreError>()("StoreError", {
  store: Schema.String,
  reason: Schema.Literals([
    "WriteFailed",
    "DiskFull",
    "Unavailable",
    "Corrupt",
    "ShuttingDown",
    "ReplyWithheld",
    "TooLarge",
    "Unsupported",
    "NotWriter",
  ]),
  message: Schema.String,
}) {}
