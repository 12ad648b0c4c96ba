/**
 * Per-origin event counts of a shared memory's store: how many domain events each daemon has
 * decided in the store, kept in the store's state (one kernel key per daemon) and counted the same
 * way by every replica as it applies each batch — so every replica numbers a daemon's events
 * 1, 2, 3... alike, and those numbers survive restarts with the checkpoint. The audit ledger uses
 * them (src/engineering/AuditStore.ts): each daemon audits the events it decided, and a jump in a
 * daemon's numbers is a gap in what it audited, whoever holds the store's writer lease between.
 * A local memory (one writer) keeps none: its sequence numbers already are its one origin's.
 */

// Kernel keys start with U+0001, below every domain key (see Idempotency.ts).
const prefix = "\u0001orig\u0000"

/** The state key of `origin`'s count. */
export const originCountKey = (origin: string): string => `${prefix}${origin}`

/** True for the state key of an origin's count. */
export const isOriginCountKey = (key: string): boolean => key.startsWith(prefix)
