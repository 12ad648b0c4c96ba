/**
 * What a record store's state holds under each key (the layout of RecordKeys.ts), as a full
 * archive import checks it (stores/StateSchema.ts): records of the store's own kinds, whose data
 * decodes with their kind's Schema and whose project, kind and id match their key; the
 * newest-first, unique-key and expiry indexes; the per-kind numbers; and the set of projects.
 */
import { Result, Schema } from "effect"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import {
  decodeProblemOf,
  everyKey,
  firstProblemUnder,
  keyMismatch,
  presenceProblem,
  type StateSchema,
  unknownKey,
} from "../stores/StateSchema.ts"
import { expiryKey, recordDescendingKey, recordKey, uniqueKey } from "./RecordKeys.ts"
import { type AnyRecordKind, StoredRecord } from "./RecordStore.ts"

const recordProblem = decodeProblemOf(StoredRecord)
const idProblem = decodeProblemOf(Schema.String)
const numberProblem = decodeProblemOf(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
const expiryProblem = decodeProblemOf(
  Schema.Struct({ at: Schema.Number, project: Schema.String, kind: Schema.String, id: Schema.String }),
)

const shown = (key: string) => JSON.stringify(key.replaceAll("\u001f", "/"))

/**
 * Every record has its newest-first entry, a live record its unique-key and expiry entries, and
 * every index entry names a record that exists and matches it (lists walk the `d` index: an entry
 * naming nothing, or a record without one, would be skipped or hidden).
 */
const recordIntegrity = (view: StoreView): string | undefined =>
  firstProblemUnder(view, everyKey, (key, value) => {
    const parts = key.split("\u001f")
    switch (`${parts[0]}/${parts.length}`) {
      case "r/4": {
        const record = value as StoredRecord
        const newest = recordDescendingKey(record.project, record.kind, record.id)
        if (view.get(newest) !== record.id) return `record ${shown(key)}: its index entry ${shown(newest)} is missing`
        if (record.deletedAt !== undefined) return undefined
        if (
          record.unique !== undefined &&
          view.get(uniqueKey(record.project, record.kind, record.unique)) !== record.id
        )
          return `record ${shown(key)}: its unique-key entry ${shown(uniqueKey(record.project, record.kind, record.unique))} is missing or names another record`
        if (
          record.expiresAt !== undefined &&
          view.get(expiryKey(record.expiresAt, record.project, record.kind, record.id)) === undefined
        )
          return `record ${shown(key)}: its expiry entry is missing`
        return undefined
      }
      case "d/4":
      case "u/4": {
        const [, project, kind] = parts as [string, string, string, string]
        const target = recordKey(project, kind, value as string)
        const record = view.get(target) as StoredRecord | undefined
        if (record === undefined)
          return `index entry ${shown(key)} names the record ${shown(target)}, which does not exist`
        if (parts[0] === "d" && recordDescendingKey(project, kind, record.id) !== key)
          return `index entry ${shown(key)} does not belong to the record ${shown(target)} it names`
        if (
          parts[0] === "u" &&
          (record.deletedAt !== undefined || uniqueKey(project, kind, record.unique ?? "") !== key)
        )
          return `index entry ${shown(key)} names the record ${shown(target)}, which is deleted or has another unique key`
        return undefined
      }
      case "x/5": {
        const entry = value as {
          readonly at: number
          readonly project: string
          readonly kind: string
          readonly id: string
        }
        const target = recordKey(entry.project, entry.kind, entry.id)
        const record = view.get(target) as StoredRecord | undefined
        return record !== undefined &&
          record.deletedAt === undefined &&
          record.expiresAt === entry.at &&
          expiryKey(entry.at, entry.project, entry.kind, entry.id) === key
          ? undefined
          : `index entry ${shown(key)} names the record ${shown(target)}, which does not exist, is deleted or expires at another time`
      }
    }
    return undefined
  })

/** The state of a record store holding `kinds`. */
export const recordState = (kinds: ReadonlyArray<AnyRecordKind>): StateSchema => {
  const kindsByName = new Map(kinds.map((kind) => [kind.name, kind]))
  const dataProblem = (kindName: string, record: StoredRecord): string | undefined => {
    const kind = kindsByName.get(kindName)
    if (kind === undefined) return `this store keeps no records of kind ${JSON.stringify(kindName)}`
    // A tombstone keeps no data (one written before that rule keeps its last data).
    if (record.deletedAt !== undefined) return undefined
    const decoded = Schema.decodeUnknownResult(kind.data)(record.data)
    return Result.isFailure(decoded) ? `its ${kindName} data: ${decoded.failure.message}` : undefined
  }
  return {
    integrity: recordIntegrity,
    problem: (key, value) => {
      const parts = key.split("\u001f")
      const [prefix, project, kind, last] = parts
      switch (`${prefix}/${parts.length}`) {
        case "r/4":
          return (
            recordProblem(value) ??
            keyMismatch(value as object, { project, kind, id: last }) ??
            dataProblem(kind!, value as StoredRecord)
          )
        case "d/4":
        case "u/4":
          return idProblem(value)
        case "n/3":
          return numberProblem(value)
        case "x/5": {
          const [, , xProject, xKind, xId] = parts
          return expiryProblem(value) ?? keyMismatch(value as object, { project: xProject, kind: xKind, id: xId })
        }
        case "pj/2":
          return presenceProblem(value)
      }
      return unknownKey
    },
  }
}
