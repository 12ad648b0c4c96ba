/**
 * What the audit ledger writes for one committed event. Record stores' events carry who, the
 * tool and the record's title, so their entries are complete. Graph events carry the project,
 * what changed and who (`by`, the client that asked; events written before it existed, and
 * imports, have none and say `who: "unknown"`); their entries name the tool the event implies.
 * Summaries hold names and ids, never bodies (a note's text, a message, an observation).
 * Events of any other store (a conversation message's `created_by`, say) get a
 * generic entry from whatever `project`/`by`/`tool` fields they have. The audit store's own
 * events are never audited (that would never end).
 */

import type { GraphEvent } from "../graph/GraphStore.ts"
import { type CommittedEvent, isDomainEvent } from "../stores/EventBus.ts"
import { type AuditEntryInput, allProjectsMarker, auditStore, auditSummaryCharsMax } from "./AuditStore.ts"
import type { RecordEvent } from "./RecordStore.ts"

/** How many names a summary lists before "and N more". */
const namesListedMax = 5

const listed = (names: ReadonlyArray<string>): string =>
  names.length <= namesListedMax
    ? names.join(", ")
    : `${names.slice(0, namesListedMax).join(", ")} and ${names.length - namesListedMax} more`

const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? "" : "s"}`

// Named, not inline: no closure made per event (docs/benchmarks.md, "Closures made for each call").
const nameOf = (entity: { readonly name: string }) => entity.name
const relationText = (relation: { readonly from: string; readonly relationType: string; readonly to: string }) =>
  `${relation.from} -${relation.relationType}-> ${relation.to}`
const entityNameOf = (change: { readonly entityName: string }) => change.entityName

const graphEntry = (event: GraphEvent): { tool: string; action: string; summary: string } => {
  switch (event._tag) {
    case "EntitiesCreated":
      return {
        tool: "create_entities",
        action: "created",
        summary: `created ${plural(event.entities.length, "entity")}: ${listed(event.entities.map(nameOf))}`,
      }
    case "RelationsCreated":
      return {
        tool: "create_relations",
        action: "created",
        summary: `created ${plural(event.relations.length, "relation")}: ${listed(event.relations.map(relationText))}`,
      }
    case "ObservationsAdded":
      return {
        tool: "add_observations",
        action: "updated",
        summary: `added ${plural(
          event.additions.reduce((sum, addition) => sum + addition.texts.length, 0),
          "observation",
        )} to ${listed(event.additions.map(entityNameOf))}`,
      }
    case "ObservationsDeleted":
      return {
        tool: "delete_observations",
        action: "updated",
        summary: `deleted observations of ${listed(event.deletions.map(entityNameOf))}`,
      }
    case "EntitiesDeleted":
      return {
        tool: "delete_entities",
        action: "deleted",
        summary: `deleted ${plural(event.names.length, "entity")}: ${listed(event.names)}`,
      }
    case "RelationsDeleted":
      return {
        tool: "delete_relations",
        action: "deleted",
        summary: `deleted ${plural(event.relations.length, "relation")}: ${listed(event.relations.map(relationText))}`,
      }
    case "EntitiesMerged":
      return {
        tool: "merge_entities",
        action: "merged",
        summary: `merged ${listed(event.sources)} into ${event.target}`,
      }
  }
}

const stringField = (event: unknown, field: string): string | undefined => {
  if (typeof event !== "object" || event === null || !(field in event)) return undefined
  const value = (event as Record<string, unknown>)[field]
  return typeof value === "string" ? value : undefined
}

/**
 * A record's entry names it by kind, number or id, and its kind's name for it (a task's title, a
 * pinned file's path) — never its body: a sticky note's text, say, would outlive the note here.
 */
export const recordSummary = (change: string, kind: string, label: string, name: string | undefined): string =>
  `${change} ${kind.replaceAll("_", " ")} ${label}${name !== undefined ? `: ${name}` : ""}`.slice(
    0,
    auditSummaryCharsMax,
  )

const isRecordEvent = (event: unknown): event is RecordEvent => stringField(event, "_tag") === "RecordWritten"

/** The ledger entry for one committed event, or undefined for the audit store's own events. */
export const auditEntryOf = (committed: CommittedEvent): AuditEntryInput | undefined => {
  const entry = entryOf(committed)
  return entry === undefined || committed.decidedBy === undefined || committed.originSeq === undefined
    ? entry
    : { ...entry, origin: committed.decidedBy, originSeq: committed.originSeq }
}

const entryOf = (committed: CommittedEvent): AuditEntryInput | undefined => {
  if (committed.store === auditStore.name || !isDomainEvent(committed)) return undefined
  const { store, seq: sourceSeq, at, event } = committed
  if (isRecordEvent(event)) {
    const { record } = event
    const label = record.number !== undefined ? `#${record.number}` : record.id
    return {
      store,
      sourceSeq,
      at,
      project: record.project,
      who: record.updatedBy,
      tool: event.tool,
      action: event.change,
      kind: record.kind,
      recordId: record.id,
      summary: recordSummary(event.change, record.kind, label, event.name),
    }
  }
  if (store === "graph") {
    const graph = event as GraphEvent
    const { tool, action, summary } = graphEntry(graph)
    return { store, sourceSeq, at, project: graph.project, who: graph.by ?? "unknown", tool, action, summary }
  }
  const tag = stringField(event, "_tag") ?? "event"
  return {
    store,
    sourceSeq,
    at,
    project: stringField(event, "project") ?? allProjectsMarker,
    who:
      stringField(event, "by") ??
      stringField(event, "createdBy") ??
      stringField(event, "created_by") ??
      stringField(event, "client") ??
      "unknown",
    tool: stringField(event, "tool") ?? tag,
    action: tag,
    summary: `${store}: ${tag}`,
  }
}
