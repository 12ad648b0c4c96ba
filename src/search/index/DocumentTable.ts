/**
 * What the search index keeps of each document in memory: the columns ranking and filters read,
 * by document number, and the groups. The texts, titles and fields are not here: they are read
 * from the document store (DocumentStore.ts) for the hits shown, a timeline, a re-ranking.
 *
 * A column is one typed array by document number (one object per column, not per document: at
 * 300,000 documents an object per document and its fields took about 54 MiB, their strings most
 * of 92). Strings that many documents share (store, project, kind, session) are codes into a
 * `StringCodes` table, which also counts their documents (health's counts per store and kind).
 * Ids stay strings, one per document, found by a `StringIndex` (a table of numbers, not a `Map`). A group's documents are a doubly linked
 * list through `nextInGroup`/`previousInGroup`, so a group costs one number, not a `Set`.
 *
 * Numbers are dense and reused after a removal (`free`). `absent` marks an unused number.
 */
import type { SearchFilter } from "../ranking/Ranking.ts"
import { seedEventTypeBit, seedEventTypeMask } from "../ranking/Ranking.ts"
import { defaultImportance, hashDigits, type SearchDocument } from "./SearchDocument.ts"
import { StringIndex } from "./StringIndex.ts"

/** An unused document or group number, or the end of a group's list. */
const absent = -1

/** Interned strings with the count of documents that use each. */
export class StringCodes {
  private readonly codes = new Map<string, number>()
  private readonly names: Array<string | undefined> = []
  private readonly uses: Array<number> = []
  private readonly free: Array<number> = []

  /** The code of `name`, counted as used once more. */
  acquire(name: string): number {
    let code = this.codes.get(name)
    if (code === undefined) {
      code = this.free.pop() ?? this.names.length
      this.codes.set(name, code)
      this.names[code] = name
      this.uses[code] = 0
    }
    this.uses[code]!++
    return code
  }

  /** One use of `code` less; the code is let go with its last use. */
  release(code: number): void {
    if (--this.uses[code]! > 0) return
    this.codes.delete(this.names[code]!)
    this.names[code] = undefined
    this.free.push(code)
  }

  code(name: string): number | undefined {
    return this.codes.get(name)
  }

  name(code: number): string {
    return this.names[code]!
  }

  /** Strings in use. */
  get size(): number {
    return this.codes.size
  }

  /** Documents per string. */
  counts(): Record<string, number> {
    const out: Record<string, number> = {}
    for (const [name, code] of this.codes) out[name] = this.uses[code]!
    return out
  }
}

const grown = <A extends Int32Array | Uint32Array | Float64Array | Uint8Array>(
  array: A,
  length: number,
  fill = 0,
): A => {
  if (length <= array.length) return array
  const next = new (array.constructor as new (length: number) => A)(Math.max(length, array.length * 2, 1024))
  next.set(array)
  if (fill !== 0) next.fill(fill, array.length)
  return next
}

/** A filter as codes: what `DocumentTable.passes` compares. */
export interface CompiledFilter {
  readonly stores?: ReadonlySet<number>
  readonly projects?: ReadonlySet<number>
  readonly kinds?: ReadonlySet<number>
  /** The session's code + 1 (-1: a session no document has). */
  readonly session?: number
  readonly since?: number
  readonly until?: number
  readonly eventTypeBit?: number
}

/** Per-document columns and groups, by document number. */
export class DocumentTable {
  readonly stores = new StringCodes()
  readonly projects = new StringCodes()
  readonly kinds = new StringCodes()
  readonly sessions = new StringCodes()
  /** Ids by number (undefined: unused). */
  private readonly ids: Array<string | undefined> = []
  private readonly byId = new StringIndex((num) => this.ids[num])
  private readonly freeNums: Array<number> = []
  private at = new Float64Array(0)
  /** The importance ranking uses (the document's, or the default). */
  private importance = new Float64Array(0)
  private store = new Uint32Array(0)
  private project = new Uint32Array(0)
  private kind = new Uint32Array(0)
  /** Session code + 1; 0 when the document has none. */
  private session = new Uint32Array(0)
  /** Seed 000's event types the document is (Ranking.ts `seedEventTypeMask`). */
  private eventTypes = new Uint8Array(0)
  /** The content hash of the embedding text, as its two 32-bit halves (SearchDocument.ts `hashText`). */
  private hashes = new Uint32Array(0)
  private group = new Int32Array(0)
  private nextInGroup = new Int32Array(0)
  private previousInGroup = new Int32Array(0)
  /** Group keys (`store \0 group`) by group number, and back. */
  private readonly groupKeys: Array<string | undefined> = []
  private readonly groupNums = new StringIndex((group) => this.groupKeys[group])
  private readonly freeGroups: Array<number> = []
  private groupFirst = new Int32Array(0)

  /** Documents held. */
  get size(): number {
    return this.byId.size
  }

  /** One past the highest number in use or ever used. */
  get numsEnd(): number {
    return this.ids.length
  }

  num(id: string): number | undefined {
    return this.byId.get(id)
  }

  id(num: number): string | undefined {
    return this.ids[num]
  }

  /** Every id held, in no particular order. */
  *allIds(): IterableIterator<string> {
    for (const id of this.ids) if (id !== undefined) yield id
  }

  atOf(num: number): number {
    return this.at[num]!
  }

  importanceOf(num: number): number {
    return this.importance[num]!
  }

  storeOf(num: number): string {
    return this.stores.name(this.store[num]!)
  }

  projectCode(num: number): number {
    return this.project[num]!
  }

  /** Session code + 1, 0 for none. */
  sessionCode(num: number): number {
    return this.session[num]!
  }

  /** The content hash of `num`'s embedding text, as `hashText` writes it. */
  hashOf(num: number): string {
    return hashDigits(this.hashes[2 * num]!, this.hashes[2 * num + 1]!)
  }

  groupOf(num: number): number {
    return this.group[num]!
  }

  groupKey(group: number): string {
    return this.groupKeys[group]!
  }

  groupNum(key: string): number | undefined {
    return this.groupNums.get(key)
  }

  /** Every group key, in no particular order. */
  *allGroupKeys(): IterableIterator<string> {
    for (const key of this.groupKeys) if (key !== undefined) yield key
  }

  /** The numbers of group `group`'s documents. */
  members(group: number): Array<number> {
    const out: Array<number> = []
    for (let num = this.groupFirst[group]!; num !== absent; num = this.nextInGroup[num]!) out.push(num)
    return out
  }

  private ensure(num: number) {
    const length = num + 1
    this.at = grown(this.at, length)
    this.importance = grown(this.importance, length)
    this.store = grown(this.store, length)
    this.project = grown(this.project, length)
    this.kind = grown(this.kind, length)
    this.session = grown(this.session, length)
    this.eventTypes = grown(this.eventTypes, length)
    this.hashes = grown(this.hashes, 2 * length)
    this.group = grown(this.group, length)
    this.nextInGroup = grown(this.nextInGroup, length)
    this.previousInGroup = grown(this.previousInGroup, length)
  }

  private groupFor(key: string): number {
    let group = this.groupNums.get(key)
    if (group === undefined) {
      group = this.freeGroups.pop() ?? this.groupKeys.length
      this.groupKeys[group] = key
      this.groupNums.set(key, group)
      this.groupFirst = grown(this.groupFirst, group + 1)
      this.groupFirst[group] = absent
    }
    return group
  }

  /** Adds `document` (whose id is not held) to group `groupKey`, with `hash` its embedding text's hash; returns its number. */
  add(document: SearchDocument, groupKey: string, hash: string): number {
    const num = this.freeNums.pop() ?? this.ids.length
    this.ensure(num)
    this.ids[num] = document.id
    this.byId.set(document.id, num)
    this.at[num] = document.at
    this.importance[num] = document.importance ?? defaultImportance
    this.store[num] = this.stores.acquire(document.store)
    this.project[num] = this.projects.acquire(document.project)
    this.kind[num] = this.kinds.acquire(document.kind)
    this.session[num] = document.session === undefined ? 0 : this.sessions.acquire(document.session) + 1
    this.eventTypes[num] = seedEventTypeMask(document)
    this.hashes[2 * num] = Number.parseInt(hash.slice(0, 7), 36)
    this.hashes[2 * num + 1] = Number.parseInt(hash.slice(7), 36)
    const group = this.groupFor(groupKey)
    this.group[num] = group
    const first = this.groupFirst[group]!
    this.nextInGroup[num] = first
    this.previousInGroup[num] = absent
    if (first !== absent) this.previousInGroup[first] = num
    this.groupFirst[group] = num
    return num
  }

  /** Removes document `num`; its group goes with its last document. */
  remove(num: number): void {
    this.byId.delete(this.ids[num]!)
    this.ids[num] = undefined
    this.stores.release(this.store[num]!)
    this.projects.release(this.project[num]!)
    this.kinds.release(this.kind[num]!)
    if (this.session[num]! > 0) this.sessions.release(this.session[num]! - 1)
    const group = this.group[num]!
    const next = this.nextInGroup[num]!
    const previous = this.previousInGroup[num]!
    if (previous === absent) this.groupFirst[group] = next
    else this.nextInGroup[previous] = next
    if (next !== absent) this.previousInGroup[next] = previous
    this.group[num] = absent
    if (this.groupFirst[group] === absent) {
      this.groupNums.delete(this.groupKeys[group]!)
      this.groupKeys[group] = undefined
      this.freeGroups.push(group)
    }
    // Ids are matched to their number through `ids` (a trailing unused number stays counted in `numsEnd`).
    this.freeNums.push(num)
  }

  /** `filter` as codes; a store, project, kind or session no document has matches nothing. */
  compile(filter: SearchFilter): CompiledFilter {
    const codes = (table: StringCodes, names: ReadonlyArray<string> | undefined) =>
      names === undefined
        ? undefined
        : new Set(names.flatMap((name) => (table.code(name) === undefined ? [] : [table.code(name)!])))
    const stores = codes(this.stores, filter.stores)
    const projects = codes(this.projects, filter.projects)
    const kinds = codes(this.kinds, filter.kinds)
    const session = filter.session === undefined ? undefined : (this.sessions.code(filter.session) ?? -2) + 1
    return {
      ...(stores !== undefined ? { stores } : {}),
      ...(projects !== undefined ? { projects } : {}),
      ...(kinds !== undefined ? { kinds } : {}),
      ...(session !== undefined ? { session } : {}),
      ...(filter.since !== undefined ? { since: filter.since } : {}),
      ...(filter.until !== undefined ? { until: filter.until } : {}),
      ...(filter.eventType !== undefined ? { eventTypeBit: seedEventTypeBit(filter.eventType) } : {}),
    }
  }

  /** True when document `num` passes `filter` (Ranking.ts `passes`, over the columns). */
  passes(filter: CompiledFilter, num: number): boolean {
    return (
      (filter.projects === undefined || filter.projects.has(this.project[num]!)) &&
      (filter.stores === undefined || filter.stores.has(this.store[num]!)) &&
      (filter.kinds === undefined || filter.kinds.has(this.kind[num]!)) &&
      (filter.session === undefined || this.session[num] === filter.session) &&
      (filter.since === undefined || this.at[num]! >= filter.since) &&
      (filter.until === undefined || this.at[num]! <= filter.until) &&
      (filter.eventTypeBit === undefined || (this.eventTypes[num]! & filter.eventTypeBit) !== 0)
    )
  }
}
