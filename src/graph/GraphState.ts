/**
 * What the graph store's state holds under each key (the layout of GraphKeys.ts), as a full
 * archive import checks it (stores/StateSchema.ts): entity and relation records that match their
 * keys, the order and incoming indexes pointing at names and relation keys, per-project counters,
 * and the set of projects.
 */
import { Schema } from "effect"
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
import {
  entityKey,
  entityOrderKey,
  type GraphEntityRecord,
  type GraphRelationRecord,
  incomingKey,
  relationKey,
  relationOrderKey,
} from "./GraphKeys.ts"

const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

const entityProblem = decodeProblemOf(
  Schema.Struct({
    project: Schema.String,
    name: Schema.String,
    entityType: Schema.String,
    observations: Schema.Array(Schema.Struct({ text: Schema.String, createdAt: Schema.Number })),
    createdAt: Schema.Number,
    updatedAt: Schema.Number,
    order: Count,
  }),
)
const relationProblem = decodeProblemOf(
  Schema.Struct({
    project: Schema.String,
    from: Schema.String,
    to: Schema.String,
    relationType: Schema.String,
    createdAt: Schema.Number,
    order: Count,
  }),
)
const countersProblem = decodeProblemOf(
  Schema.Struct({ nextEntityOrder: Count, nextRelationOrder: Count, entities: Count, relations: Count }),
)
const stringProblem = decodeProblemOf(Schema.String)

const shown = (key: string) => JSON.stringify(key.replaceAll("\u0000", "/"))

/**
 * Every entity and relation has its order entry (and a relation its incoming entry) pointing back
 * at it, and every index entry names a record that exists: read_graph and search_nodes walk the
 * order indexes, so an entry naming nothing, or taking a record's place, hides that record.
 */
const graphIntegrity = (view: StoreView): string | undefined =>
  firstProblemUnder(view, everyKey, (key, value) => {
    const parts = key.split("\u0000")
    const project = parts[1]!
    switch (`${parts[0]}/${parts.length}`) {
      case "e/3": {
        const entity = value as GraphEntityRecord
        return view.get(entityOrderKey(project, entity.order)) === entity.name
          ? undefined
          : `entity ${shown(key)}: its order entry ${shown(entityOrderKey(project, entity.order))} is missing or names another entity`
      }
      case "eo/3": {
        const entity = view.get(entityKey(project, value as string)) as GraphEntityRecord | undefined
        if (entity === undefined)
          return `index entry ${shown(key)} names the entity ${JSON.stringify(value)}, which does not exist`
        return entityOrderKey(project, entity.order) === key
          ? undefined
          : `index entry ${shown(key)} names the entity ${JSON.stringify(value)}, whose order is ${entity.order}`
      }
      case "r/5": {
        const relation = value as GraphRelationRecord
        const incoming = incomingKey(project, relation.from, relation.to, relation.relationType)
        if (view.get(incoming) !== key)
          return `relation ${shown(key)}: its incoming entry ${shown(incoming)} is missing`
        return view.get(relationOrderKey(project, relation.order)) === key
          ? undefined
          : `relation ${shown(key)}: its order entry ${shown(relationOrderKey(project, relation.order))} is missing or names another relation`
      }
      case "ri/5":
      case "ro/3": {
        const relation = view.get(value as string) as GraphRelationRecord | undefined
        if (relation === undefined)
          return `index entry ${shown(key)} names the relation ${shown(value as string)}, which does not exist`
        return parts[0] === "ri" || relationOrderKey(project, relation.order) === key
          ? undefined
          : `index entry ${shown(key)} names the relation ${shown(value as string)}, whose order is ${relation.order}`
      }
    }
    return undefined
  })

/** The graph store's state. */
export const graphState: StateSchema = {
  integrity: graphIntegrity,
  problem: (key, value) => {
    const parts = key.split("\u0000")
    const [kind, project, ...rest] = parts
    switch (`${kind}/${parts.length}`) {
      case "e/3":
        return entityProblem(value) ?? keyMismatch(value as object, { project, name: rest[0] })
      case "r/5":
        return (
          relationProblem(value) ??
          keyMismatch(value as object, { project, from: rest[0], to: rest[1], relationType: rest[2] })
        )
      case "ri/5": {
        const [to, from, type] = rest as [string, string, string]
        const expected = relationKey(project!, from, to, type)
        return value === expected ? undefined : `expected the relation key ${JSON.stringify(expected)}`
      }
      case "eo/3":
      case "ro/3":
        return stringProblem(value)
      case "n/2":
        return countersProblem(value)
      case "pj/2":
        return presenceProblem(value)
    }
    return unknownKey
  },
}
