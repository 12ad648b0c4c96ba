/**
 * Idempotent commands: a command sent with an idempotency key is applied at most once, and every
 * repeat of it gets the first reply — across reconnects and across a crash of the daemon.
 *
 * When a command with key K succeeds with events, its last event's WAL record also carries an
 * idempotency record {K, reply, at} (record type `eventWithReplyRecordType`); replay restores it
 * with the data, so after any crash the record exists exactly when the write does. A keyed command
 * that changes nothing, or that the domain refuses, is remembered in a record of its own
 * (`idempotencyRecordType`; a refusal with its failure, encoded with the store's `failureSchema`),
 * so its retry is answered the same way and never decided again on later state — which a replicated
 * log needs, where the retry may reach another daemon. Every record is announced on the event bus
 * (a kernel record: no domain event), so the published sequences stay gap-free, which is how
 * subscribers tell that the bus dropped events. A later command with key K finds the
 * record (in the batch overlay or the committed state) and is answered from it without being
 * decided again. Commands are processed one batch at a time, in order, so a repeat always sees
 * the record of the first. Records older than `idempotencyTtlMs` are pruned at checkpoints. A
 * compaction keeps every record but drops its reply (`withheld`), since a reply can quote what was
 * deleted since: a repeat after it is refused with `ReplyWithheld` and still not applied again.
 */
import type { KeyRange, StoreView } from "./checkpoint/Checkpoint.ts"

/** WAL record type of a stand-alone idempotency record, as older logs hold them (events are type 1). */
export const idempotencyRecordType = 2
/** WAL record type of a command's last event carrying its idempotency record: `{ event, remember }`. */
export const eventWithReplyRecordType = 3
/** How long a key is remembered. */
export const idempotencyTtlMs = 24 * 60 * 60 * 1000
/** Longest idempotency key, in UTF-16 code units. */
export const idempotencyKeyLengthMax = 512
/** At most this many expired records are pruned per checkpoint. */
export const idempotencyPruneMax = 10_000

/** What is remembered for a key. */
export interface IdempotencyRecord {
  readonly key: string
  readonly reply: unknown
  readonly at: number
  /** A refusal's failure, encoded with the store's `failureSchema` (then `reply` is null). */
  readonly failure?: unknown
  /** Set by a compaction: the command was applied, but its reply (which may quote deleted data) is gone. */
  readonly withheld?: true
}

// Kernel keys start with U+0001, below every domain key (domain prefixes are printable).
const prefix = "\u0001idem\u0000"
const range: KeyRange = { start: prefix, end: "\u0001idem\u0001" }

/** True for the state key of an idempotency record. */
export const isIdempotencyStateKey = (stateKey: string): boolean => stateKey.startsWith(prefix)

/** The record as a compaction keeps it: applied, reply dropped (see `IdempotencyRecord.withheld`). */
export const withheldRecord = (record: IdempotencyRecord): IdempotencyRecord => ({
  key: record.key,
  reply: null,
  at: record.at,
  withheld: true,
})

/** The state key of an idempotency key. */
export const idempotencyStateKey = (key: string): string => `${prefix}${key}`

/** The remembered reply for `key`, if any. */
export const rememberedReply = (view: StoreView, key: string): IdempotencyRecord | undefined =>
  view.get(idempotencyStateKey(key)) as IdempotencyRecord | undefined

/** State keys of records older than the TTL, oldest scan order, at most `idempotencyPruneMax`. */
export const expiredKeys = (view: StoreView, now: number): Array<string> => {
  const expired: Array<string> = []
  for (const { key, value } of view.getRange(range)) {
    if ((value as IdempotencyRecord).at < now - idempotencyTtlMs) expired.push(key)
    if (expired.length >= idempotencyPruneMax) break
  }
  return expired
}
