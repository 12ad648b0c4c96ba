/**
 * The key layout of a record store (RecordStore.ts) in LMDB. Components are joined with U+001F
 * (shown as `/` below), which projects, kinds, ids and unique keys may not contain (no C0
 * control character may), so every prefix `P + "/"` has the exclusive upper bound `P + " "`
 * (U+0020) in byte order.
 *
 * Why not U+0000 like the graph store: lmdb-js's own string keys encode keys of 64 characters or
 * more containing bytes 0x00–0x03 differently from shorter ones, so prefix ranges missed them
 * (test/engineering/KernelLongKeys.test.ts; the checkpoint now encodes keys itself). U+001F is
 * safe with either encoding.
 *
 * Newest-first lists walk the `d` index forwards instead of `r` backwards: the kernel's reverse
 * range reads are not reliable yet (see test/engineering/KernelReverseRange.test.ts).
 *
 *   r / project / kind / id          → StoredRecord               (ULID ids: creation order)
 *   d / project / kind / ~id         → id                         (newest first: `~id` inverts the ULID)
 *   u / project / kind / unique      → id                         (live records of kinds with a unique key)
 *   n / project / kind               → last number                (numbered kinds, e.g. ADR-0007)
 *   x / time / project / kind / id   → {at, project, kind, id}    (live records that expire, by time)
 *   pj / project                     → 1                          (the projects that have records)
 */
import type { KeyRange } from "../stores/checkpoint/Checkpoint.ts"

const sep = "\u001f"
/** Whether `key` is a record's key (`r / project / kind / id`). */
export const isRecordKey = (key: string): boolean => key.startsWith(`r${sep}`)
const end = " "

/** A range covering every key that starts with `prefix` (which must end in the separator). */
const under = (prefix: string): KeyRange => ({ start: prefix, end: `${prefix.slice(0, -1)}${end}` })

export const recordKey = (project: string, kind: string, id: string): string =>
  `r${sep}${project}${sep}${kind}${sep}${id}`
/** Record ids are ULIDs (Crockford base 32, 26 characters), so they can be inverted for the `d` index. */
export const ulidPattern = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
/** The id whose order is the reverse of `id`'s among ULIDs (any other text maps to some key, never fails). */
const invertId = (id: string): string =>
  Array.from(id, (char) => {
    const index = crockford.indexOf(char)
    return index === -1 ? "~" : crockford[crockford.length - 1 - index]!
  }).join("")

export const recordDescendingKey = (project: string, kind: string, id: string): string =>
  `d${sep}${project}${sep}${kind}${sep}${invertId(id)}`
export const uniqueKey = (project: string, kind: string, unique: string): string =>
  `u${sep}${project}${sep}${kind}${sep}${unique}`
export const numberKey = (project: string, kind: string): string => `n${sep}${project}${sep}${kind}`
export const projectKey = (project: string): string => `pj${sep}${project}`

/** Every record of one kind in one project, in id (creation) order. */
export const recordsOfKind = (project: string, kind: string): KeyRange => under(`r${sep}${project}${sep}${kind}${sep}`)
/** Records of one kind whose id is after `id` (exclusive), for cursors. */
export const recordsAfter = (project: string, kind: string, id: string): KeyRange => ({
  start: `${recordKey(project, kind, id)}${sep}`,
  end: recordsOfKind(project, kind).end,
})
/** Ids of every record of one kind, newest first (values are ids). */
export const recordsNewestFirst = (project: string, kind: string): KeyRange =>
  under(`d${sep}${project}${sep}${kind}${sep}`)
/** Ids of records of one kind older than `id` (exclusive), newest first, for cursors. */
export const recordsOlderThan = (project: string, kind: string, id: string): KeyRange => ({
  start: `${recordDescendingKey(project, kind, id)}${sep}`,
  end: recordsNewestFirst(project, kind).end,
})
export const allProjects: KeyRange = under(`pj${sep}`)
/** Every record of every project and kind. */
export const allRecords: KeyRange = under(`r${sep}`)

/** The width of an encoded time (36^9 > 2^45 ms, beyond the year 3000). */
const timeWidth = 9
export const expiryKey = (at: number, project: string, kind: string, id: string): string =>
  `x${sep}${Math.max(0, at).toString(36).padStart(timeWidth, "0")}${sep}${project}${sep}${kind}${sep}${id}`
/** Expiry entries of records that expire at or before `time`, earliest first. */
export const expiringBy = (time: number): KeyRange => ({
  start: `x${sep}`,
  end: `x${sep}${(Math.max(0, time) + 1).toString(36).padStart(timeWidth, "0")}`,
})
/** Every expiry entry, earliest first. */
export const allExpiring: KeyRange = under(`x${sep}`)
/** What an expiry entry holds (in its value: range reads give values, keys are not parsed). */
export interface ExpiryEntry {
  readonly at: number
  readonly project: string
  readonly kind: string
  readonly id: string
}

/** The project named by a `projectKey`. */
export const projectOfKey = (key: string): string => key.slice(3)

/** True when a text can be a key component: no C0 control character (the separator is one). */
export const isKeySafe = (text: string): boolean => {
  for (let index = 0; index < text.length; index++) if (text.charCodeAt(index) < 0x20) return false
  return true
}
