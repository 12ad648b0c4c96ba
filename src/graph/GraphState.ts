/**
 * What the graph store's state holds under each key (the layout of GraphKeys.ts), as a full
 * archive import checks it (stores/StateSchema.ts): entity and relation records that match their
 * keys, the order and incoming indexes pointing at names and relation keys, per-project counters,
 * and the set of projects.
 */
import { Schema } from "effect"
import { decodeProblemOf, keyMismatch, presenceProblem, type StateSchema, unknownKey } from "../stores/StateSchema.ts"
import { relationKey } from "./GraphKeys.ts"

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

/** The graph store's state. */
export const graphState: StateSchema = {
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
