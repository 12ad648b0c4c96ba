/**
 * What a store's key/value state may hold, key by key — the types a full archive import checks
 * every entry against before anything is written (Archive.ts), so that a hand-edited archive
 * cannot plant a value the store's reads would choke on.
 *
 * Each domain says what its keys hold (graph/GraphState.ts, conversations/ConversationState.ts,
 * engineering/RecordState.ts, engineering/AuditStore.ts); this module adds the keys the kernel
 * itself keeps in every store (idempotency records) and the helpers they share. A key no schema
 * knows does not belong in the store, and is refused like a wrong value.
 */
import { Result, Schema } from "effect"
import type { KeyRange, StoreView } from "./checkpoint/Checkpoint.ts"
import { idempotencyStateKey } from "./Idempotency.ts"
import { isOriginCountKey } from "./OriginCounts.ts"

/** A store's state, as an import checks it. */
export interface StateSchema {
  /** Why `value` cannot be stored under `key`, or undefined when it can. */
  readonly problem: (key: string, value: unknown) => string | undefined
  /**
   * Why the whole state, every entry already `problem`-free, does not hold together, naming the
   * first record that breaks it: an index entry whose record is missing, a record its indexes
   * miss. Undefined when it holds. An index entry naming nothing made its real record vanish from
   * reads (read_graph and search_nodes walk the order index).
   */
  readonly integrity?: (view: StoreView) => string | undefined
}

/** Every key of a store sorts inside this range. */
export const everyKey = { start: "", end: "\u{10FFFF}" }

/** The first `problem` of the entries under `prefix`, in key order. */
export const firstProblemUnder = (
  view: StoreView,
  range: KeyRange,
  problem: (key: string, value: unknown) => string | undefined,
): string | undefined => {
  for (const { key, value } of view.getRange(range)) {
    const found = problem(key, value)
    if (found !== undefined) return found
  }
  return undefined
}

/** The reason for a key no schema knows. */
export const unknownKey = "no such key belongs in this store"

/** A decoder of `schema` that gives the failure's message, or undefined when `value` decodes. */
export const decodeProblemOf = <A>(schema: Schema.Codec<A, unknown>) => {
  const decode = Schema.decodeUnknownResult(schema)
  return (value: unknown): string | undefined => {
    const decoded = decode(value)
    return Result.isFailure(decoded) ? decoded.failure.message : undefined
  }
}

/** The value under a key whose presence is all it says (sets, indexes): `1`. */
export const presenceProblem = decodeProblemOf(Schema.Literal(1))

/** Why a decoded record does not match the key it is stored under, or undefined. */
export const keyMismatch = (value: object, expected: Readonly<Record<string, unknown>>): string | undefined => {
  for (const [field, wanted] of Object.entries(expected)) {
    const actual = (value as Record<string, unknown>)[field]
    if (actual !== wanted)
      return `its ${field} is ${JSON.stringify(actual)}, but its key says ${JSON.stringify(wanted)}`
  }
  return undefined
}

const idempotencyPrefix = idempotencyStateKey("")
const idempotencyRecordProblem = decodeProblemOf(
  Schema.Struct({
    key: Schema.String,
    reply: Schema.Unknown,
    at: Schema.Number,
    failure: Schema.optionalKey(Schema.Unknown),
    withheld: Schema.optionalKey(Schema.Literal(true)),
  }),
)

const originCountProblem = decodeProblemOf(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))

/**
 * `own`, plus the kernel's keys every store may hold: idempotency records (Idempotency.ts) and, in
 * a shared memory, per-origin event counts (OriginCounts.ts).
 */
export const withKernelKeys = (own: StateSchema): StateSchema => ({
  ...(own.integrity !== undefined ? { integrity: own.integrity } : {}),
  problem: (key, value) => {
    if (isOriginCountKey(key)) return originCountProblem(value)
    if (!key.startsWith(idempotencyPrefix)) return own.problem(key, value)
    return idempotencyRecordProblem(value) ?? keyMismatch(value as object, { key: key.slice(idempotencyPrefix.length) })
  },
})
