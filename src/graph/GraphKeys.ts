/**
 * The graph store's key layout in LMDB. Components are joined with U+0000, which names may not
 * contain, so every prefix `P + "\0"` has the exclusive upper bound `P + "\u0001"` in byte order.
 *
 *   e  \0 project \0 name                      → GraphEntityRecord
 *   eo \0 project \0 order                     → entity name            (creation order)
 *   r  \0 project \0 from \0 to \0 type        → GraphRelationRecord
 *   ri \0 project \0 to \0 from \0 type        → relation key            (incoming index)
 *   ro \0 project \0 order                     → relation key            (creation order)
 *   n  \0 project                              → ProjectCounters
 *   pj \0 project                              → 1                      (the projects that exist)
 *
 * `order` is a per-project counter, zero-padded base 36, so iteration follows creation order:
 * read_graph and search_nodes return items in the order the official server would.
 */
import type { KeyRange } from "../stores/checkpoint/Checkpoint.ts"

const sep = "\u0000"
const end = "\u0001"

/** The width of an encoded order number (36^11 > 2^53). */
const orderWidth = 11

/** An entity as the graph store keeps it. */
export interface GraphEntityRecord {
  readonly project: string
  readonly name: string
  readonly entityType: string
  readonly observations: ReadonlyArray<{ readonly text: string; readonly createdAt: number }>
  readonly createdAt: number
  readonly updatedAt: number
  readonly order: number
}

/** A relation as the graph store keeps it. */
export interface GraphRelationRecord {
  readonly project: string
  readonly from: string
  readonly to: string
  readonly relationType: string
  readonly createdAt: number
  readonly order: number
}

/** Per-project counters: the next creation order numbers and the live counts. */
export interface ProjectCounters {
  readonly nextEntityOrder: number
  readonly nextRelationOrder: number
  readonly entities: number
  readonly relations: number
}

export const emptyCounters: ProjectCounters = { nextEntityOrder: 0, nextRelationOrder: 0, entities: 0, relations: 0 }

const encodeOrder = (order: number): string => order.toString(36).padStart(orderWidth, "0")

/** A range covering every key that starts with `prefix` (which must end in the separator). */
const under = (prefix: string): KeyRange => ({ start: prefix, end: `${prefix.slice(0, -1)}${end}` })

export const entityKey = (project: string, name: string): string => `e${sep}${project}${sep}${name}`
export const entityOrderKey = (project: string, order: number): string =>
  `eo${sep}${project}${sep}${encodeOrder(order)}`
export const relationKey = (project: string, from: string, to: string, type: string): string =>
  `r${sep}${project}${sep}${from}${sep}${to}${sep}${type}`
export const incomingKey = (project: string, from: string, to: string, type: string): string =>
  `ri${sep}${project}${sep}${to}${sep}${from}${sep}${type}`
export const relationOrderKey = (project: string, order: number): string =>
  `ro${sep}${project}${sep}${encodeOrder(order)}`
export const countersKey = (project: string): string => `n${sep}${project}`
export const projectKey = (project: string): string => `pj${sep}${project}`

export const entitiesInOrder = (project: string): KeyRange => under(`eo${sep}${project}${sep}`)
export const entitiesByName = (project: string): KeyRange => under(`e${sep}${project}${sep}`)
export const relationsInOrder = (project: string): KeyRange => under(`ro${sep}${project}${sep}`)
export const relationsByEnds = (project: string): KeyRange => under(`r${sep}${project}${sep}`)
export const relationsFrom = (project: string, from: string): KeyRange => under(`r${sep}${project}${sep}${from}${sep}`)
export const relationsTo = (project: string, to: string): KeyRange => under(`ri${sep}${project}${sep}${to}${sep}`)
export const allProjects: KeyRange = under(`pj${sep}`)

/** The project named by a `projectKey`. */
export const projectOfKey = (key: string): string => key.slice(3)

/** The (from, to, type) of a relation key. */
export const parseRelationKey = (key: string): { from: string; to: string; relationType: string } => {
  const [, , from, to, relationType] = key.split(sep)
  return { from: from!, to: to!, relationType: relationType! }
}

/** The relation key an incoming-index key points at. */
export const relationKeyOfIncoming = (key: string): string => {
  const [, project, to, from, type] = key.split(sep)
  return relationKey(project!, from!, to!, type!)
}

/** True when a name can be stored (it must not contain the key separator). */
export const isStorableName = (text: string): boolean => !text.includes(sep)
