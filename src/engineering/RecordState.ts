/**
 * What a record store's state holds under each key (the layout of RecordKeys.ts), as a full
 * archive import checks it (stores/StateSchema.ts): records of the store's own kinds, whose data
 * decodes with their kind's Schema and whose project, kind and id match their key; the
 * newest-first, unique-key and expiry indexes; the per-kind numbers; and the set of projects.
 */
import { Result, Schema } from "effect"
import { decodeProblemOf, keyMismatch, presenceProblem, type StateSchema, unknownKey } from "../stores/StateSchema.ts"
import { type AnyRecordKind, StoredRecord } from "./RecordStore.ts"

const recordProblem = decodeProblemOf(StoredRecord)
const idProblem = decodeProblemOf(Schema.String)
const numberProblem = decodeProblemOf(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)))
const expiryProblem = decodeProblemOf(
  Schema.Struct({ at: Schema.Number, project: Schema.String, kind: Schema.String, id: Schema.String }),
)

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
