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
 * A file without the mark (`vectorKeys` in meta) had its vectors by id: at open, each document's
 * vector in either slot moves under its key (in transactions of `moveChunkEntries`), vectors of no
 * document are dropped, and the mark is written last. It is safe to cut short: a vector moves only
 * where its key holds none yet (what was stored under the key since is newer), and the next open
 * moves the rest. Without room on the disk it waits for the next start, and the index embeds again
 * what it finds no vector for meanwhile.
 */
import type { Database, RootDatabase } from "lmdb"
import { noRoomFor } from "../../stores/checkpoint/LmdbRoom.ts"
import type { SearchDocument } from "../index/SearchDocument.ts"

/** The meta key of the mark, and its value once vectors are keyed by document. */
export const vectorKeysMark = "vectorKeys"
export const vectorsByDocument = "document"

/** Entries moved per transaction. */
const moveChunkEntries = 1000

/** What the move needs of search's environment. */
export interface VectorKeyHandles {
  readonly env: RootDatabase
  readonly documents: Database<SearchDocument, string>
  readonly vectors: ReadonlyArray<Database<Uint8Array, string>>
  readonly meta: Database<unknown, string>
}

const isEmpty = (db: Database<Uint8Array, string>) => {
  for (const _ of db.getKeys({ limit: 1 })) return false
  return true
}

/**
 * Moves the vectors of a file written before they were keyed by document, and marks it; nothing
 * when it is marked. Returns why it did not, when it could not (no room on the disk at `path`).
 */
export const keyVectorsByDocument = (
  path: string,
  handles: VectorKeyHandles,
  roomBytes: number,
): string | undefined => {
  const { env, documents, vectors, meta } = handles
  if (meta.get(vectorKeysMark) === vectorsByDocument) return undefined
  if (vectors.some((db) => !isEmpty(db))) {
    const noRoom = noRoomFor(path, roomBytes)
    if (noRoom !== undefined) return noRoom
    moveUnderDocumentKeys(handles)
    for (const db of vectors) dropKeysOfNoDocument(env, documents, db)
  }
  meta.putSync(vectorKeysMark, vectorsByDocument)
  return undefined
}

/** Each document's vectors, in either slot, from under its id to under its key. */
const moveUnderDocumentKeys = ({ env, documents, vectors }: VectorKeyHandles) => {
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
        for (const db of vectors) {
          const bytes = db.getBinary(value.id)
          if (bytes === undefined) continue
          if (db.getBinary(key) === undefined) db.putSync(key, Buffer.from(bytes))
          db.removeSync(value.id)
        }
    })
    after = batch[batch.length - 1]!.key
  }
}

/** Removes `db`'s vectors whose key is no document's (a document id's, of a document gone). */
const dropKeysOfNoDocument = (
  env: RootDatabase,
  documents: Database<SearchDocument, string>,
  db: Database<Uint8Array, string>,
) => {
  const stale: Array<string> = []
  for (const key of db.getKeys()) if (!documents.doesExist(key)) stale.push(key)
  for (let start = 0; start < stale.length; start += moveChunkEntries)
    env.transactionSync(() => {
      for (const key of stale.slice(start, start + moveChunkEntries)) db.removeSync(key)
    })
}
