/**
 * The engineering domain's stores, in the order the engine starts them: the record stores
 * (tasks, ADRs, notes, code history, gates), then the audit ledger's store.
 */
import type { AnyStoreDefinition } from "../stores/StoreDefinition.ts"
import { adrsStore } from "./Adrs.ts"
import { auditStore } from "./AuditStore.ts"
import { engineeringStore } from "./CodeHistory.ts"
import { gatesStore } from "./Gates.ts"
import { notesStore } from "./Notes.ts"
import type { RecordStoreDefinition } from "./RecordStore.ts"
import { tasksStore } from "./Tasks.ts"

/** The record stores (RecordStore.ts). */
export const recordStores: ReadonlyArray<RecordStoreDefinition> = [
  tasksStore,
  adrsStore,
  notesStore,
  engineeringStore,
  gatesStore,
]

/** Every store of the engineering domain. */
export const engineeringStores: ReadonlyArray<AnyStoreDefinition> = [...recordStores, auditStore]
