/**
 * How conversation messages appear in omni search and the mem-* tools (the searchable-documents
 * contract of src/search/index/SearchDocument.ts): one group of one document per live message of the
 * current generation, re-read from the view for every event that names it. An import switches
 * the whole generation, and a purge drops tombstones: both ask for a rescan.
 */

import type { GroupDocuments, SearchSource } from "../search/index/SearchDocument.ts"
import type { StoreView } from "../stores/checkpoint/Checkpoint.ts"
import { genPrefix, type StoredMessage } from "./ConversationKeys.ts"
import { type ConversationEvent, conversationStore } from "./ConversationStore.ts"
import { currentGen } from "./Generations.ts"
import { readStored } from "./MessageState.ts"

/** Characters of the content used as a message's title. */
const titleCharsMax = 120

const groupOf = (project: string, id: string) => `${project}\u0000${id}`

const documentsOf = (stored: StoredMessage | undefined, project: string, id: string): GroupDocuments => {
  if (stored === undefined || stored.deleted_at !== undefined) return { group: groupOf(project, id), documents: [] }
  const { message } = stored
  const firstLine = (message.metadata.summary ?? message.content).split("\n", 1)[0] ?? ""
  return {
    group: groupOf(project, id),
    documents: [
      {
        id: message.message_id,
        store: conversationStore.name,
        project,
        kind: "message",
        title: firstLine.slice(0, titleCharsMax),
        text: [message.content, message.metadata.summary ?? "", message.metadata.tags.join(" ")].join("\n"),
        session: message.session_id,
        at: message.timestamp,
        importance: message.metadata.importance / 100,
        fields: {
          role: message.role,
          memory_kind: message.metadata.memory_kind,
          memory_tier: message.metadata.memory_tier,
          ...(message.metadata.tool_call_id !== undefined ? { tool_call_id: message.metadata.tool_call_id } : {}),
        },
      },
    ],
  }
}

/** Conversation messages for the search indexer. */
export const conversationSearchSource: SearchSource<ConversationEvent> = {
  definition: conversationStore,
  changes: (event, view) => {
    switch (event._tag) {
      case "MessageWritten":
      case "MessageUpdated":
        return [
          documentsOf(
            readStored(view, currentGen(view), event.project, event.message.message_id),
            event.project,
            event.message.message_id,
          ),
        ]
      case "MessageDeleted":
        return [
          documentsOf(
            readStored(view, currentGen(view), event.project, event.message_id),
            event.project,
            event.message_id,
          ),
        ]
      case "ImportCommitted":
        return "resync"
      default:
        // Tombstones were already out of search; import chunks go to a staging generation.
        return []
    }
  },
  scan: function* (view: StoreView) {
    const prefix = `${genPrefix(currentGen(view))}m\u0005`
    for (const { value } of view.getRange({ start: prefix, end: `${prefix.slice(0, -1)}\u0006` })) {
      const stored = value as StoredMessage
      yield documentsOf(stored, stored.project, stored.message.message_id)
    }
  },
}
