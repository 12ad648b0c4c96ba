/**
 * Why search's vectors are kept under their document's key, and the one-time move of the vectors
 * an older file kept by document id.
 *
 * A document id is a hash (SearchDocument.ts, `hashJoined`): keyed by it, the 40 vectors of one
 * `create_entities` of 10 fell on 40 leaves of the B-tree, and each commit wrote every leaf it
 * dirtied — about 21 pages of 4 KiB a call, 42,616 page writes in 4 s of sequential calls against
 * 788 without them (docs/benchmarks.md, "Search's page writes are its vectors'"). Under the
 * document's key (`store \0 group \0 id`: one entity's documents side by side) they land on the
 * leaves its documents do.
 *
 * The slots keyed by document are LMDB dbs of their own (`document-vectors`, `document-vectors-1`);
 * an older file's, keyed by id, are `vectors` and `vectors-1`. At open, while those hold anything,
 * each document's vector in either moves to the same slot under the document's key, in key order
 * (appended, in transactions of `moveChunkEntries`), and they are emptied last (a vector of no
 * document goes with them). A move cut short starts again at the next open; a key that holds a
 * vector already keeps it (it was written since, so it is newer). Without room on the disk it
 * waits for the next start, and the index embeds again what it finds no vector for meanwhile.
 */
import type { Database, RootDatabase } from "lmdb"
import { lmdbUsedBytes } from "../../stores/checkpoint/Checkpoint.ts"
import { keyedDatabase } from "../../stores/checkpoint/KeyCodec.ts"
import { noRoomFor } from "../../stores/checkpoint/LmdbRoom.ts"
import type { SearchDocument } from "../index/SearchDocument.ts"

/** The LMDB dbs of the two vector slots, keyed by document. */
export const vectorSlotNames = ["document-vectors", "document-vectors-1"] as const
/** The same slots in a file written before: keyed by document id. */
export const idKeyedSlotNames = ["vectors", "vectors-1"] as const

/** Documents whose vectors are moved per transaction. */
const moveChunkEntries = 1000

/** What the move needs of search's environment. */
export interface VectorKeyHandles {
  readonly env: RootDatabase
  readonly documents: Database<SearchDocument, string>
  /** The slots keyed by document, in `vectorSlotNames`' order. */
  readonly vectors: ReadonlyArray<Database<Uint8Array, string>>
}

const isEmpty = (db: Database<Uint8Array, string>) => {
  for (const _ of db.getKeys({ limit: 1 })) return false
  return true
}

/**
 * Moves an older file's vectors under their documents' keys; nothing when there are none. Returns
 * why it did not, when it could not: no room on the disk at `path` for twice what they take (their
 * copy's pages, with longer keys, before theirs are freed) and `turnRoomBytes`.
 */
export const keyVectorsByDocument = (
  path: string,
  handles: VectorKeyHandles,
  turnRoomBytes: number,
): string | undefined => {
  const byId = idKeyedSlotNames.map((name) => handles.env.openDB<Uint8Array, string>(keyedDatabase(name, "binary")))
  if (byId.every(isEmpty)) return undefined
  const noRoom = noRoomFor(path, 2 * lmdbUsedBytes(byId) + turnRoomBytes)
  if (noRoom !== undefined) return noRoom
  moveUnderDocumentKeys(handles, byId)
  for (const db of byId) db.clearSync()
  return undefined
}

/** Each document's vector in either slot of `byId`, to the same slot under the document's key. */
const moveUnderDocumentKeys = (
  { env, documents, vectors }: VectorKeyHandles,
  byId: ReadonlyArray<Database<Uint8Array, string>>,
) => {
  let after: string | undefined
  for (;;) {
    // Read whole before writing: no snapshot is held across a commit.
    const batch = [
      ...documents.getRange(
        after === undefined ? { limit: moveChunkEntries } : { start: after, limit: moveChunkEntries + 1 },
      ),
    ]
    if (after !== undefined && batch[0]?.key === after) batch.shift()
    if (batch.length === 0) return
    env.transactionSync(() => {
      for (const { key, value } of batch)
        for (let slot = 0; slot < byId.length; slot++) {
          const bytes = byId[slot]!.getBinary(value.id)
          const to = vectors[slot]!
          if (bytes !== undefined && !to.doesExist(key)) to.putSync(key, Buffer.from(bytes))
        }
    })
    after = batch[batch.length - 1]!.key
  }
}
