/**
 * The stores search indexes: one `SearchSource` per store (see SearchDocument.ts). A store that
 * wants to be found exports its source from its own module and is listed here; the indexer has
 * no other per-store code.
 */
import { conversationSearchSource } from "../conversations/ConversationSearchSource.ts"
import { engineeringSearchSources } from "../engineering/RecordSearch.ts"
import { graphSearchSource } from "./GraphDocuments.ts"
import type { AnySearchSource } from "./index/SearchDocument.ts"

/** Every search source the engine runs. */
export const searchSources: ReadonlyArray<AnySearchSource> = [
  graphSearchSource,
  conversationSearchSource,
  ...engineeringSearchSources,
]
