/**
 * The `adrs` store: architecture decision records, numbered per project (ADR-0001, ...), with
 * status proposed → accepted → superseded | deprecated. Recording an ADR that supersedes another
 * marks the older one superseded, in the same command (both change or neither).
 */
import { Schema } from "effect"
import { NonEmptyText, RecordId, Tags, Text, Title } from "./Fields.ts"
import { defineKind, makeRecordStore } from "./RecordStore.ts"

export const adrStatuses = ["proposed", "accepted", "superseded", "deprecated"] as const
export const AdrStatus = Schema.Literals(adrStatuses)

export const AdrData = Schema.Struct({
  title: Title,
  status: AdrStatus,
  context: NonEmptyText,
  decision: NonEmptyText,
  consequences: Schema.optionalKey(Text),
  supersedes: Schema.optionalKey(RecordId),
  supersededBy: Schema.optionalKey(RecordId),
  tags: Schema.optionalKey(Tags),
})
export type AdrData = typeof AdrData.Type

export const adrKind = defineKind<AdrData>({
  name: "adr",
  data: AdrData,
  numbered: true,
  title: (adr) => adr.title,
  namedBy: (adr) => adr.title,
  text: (adr) => [adr.title, adr.context, adr.decision, adr.consequences, ...(adr.tags ?? [])],
})

/** "ADR-0007". */
export const adrLabel = (number: number | undefined): string =>
  number === undefined ? "ADR" : `ADR-${String(number).padStart(4, "0")}`

export const adrsStore = makeRecordStore("adrs", [adrKind])
