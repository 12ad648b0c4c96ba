/**
 * The in-memory twin of search's persistence (SearchPersistence.ts): the same contract, nothing on
 * disk. The index core uses it when there is no data directory; one suite runs against both.
 */
import type { CompactVector } from "../index/CompactVector.ts"
import { documentKey, makeMemoryDocumentStore } from "../index/DocumentStore.ts"
import type { SearchDocument } from "../index/SearchDocument.ts"
import { groupRuns, type PersistedModel, type PersistedVector, type SearchPersistence } from "./SearchPersistence.ts"

/** A vector as kept here: a copy, so the caller's array may change afterwards. */
const copyOf = (vector: Float32Array | CompactVector): Float32Array | CompactVector =>
  vector instanceof Float32Array ? vector.slice() : { codes: vector.codes.slice(), peak: vector.peak }

/** The in-memory twin: same contract, nothing on disk. */
export const makeMemoryPersistence = (): SearchPersistence => {
  const documents = new Map<string, SearchDocument>()
  const documentStore = makeMemoryDocumentStore(documents)
  let vectors = new Map<string, PersistedVector>()
  let nextVectors = new Map<string, PersistedVector>()
  const seqs = new Map<string, number>()
  let model: PersistedModel | undefined
  let nextModel: PersistedModel | undefined
  let writesSinceRelease = 0
  /** Counts a write, as the LMDB layer counts those whose transactions map pages. */
  const counted =
    <A extends ReadonlyArray<unknown>>(write: (...args: A) => void) =>
    (...args: A): void => {
      writesSinceRelease++
      write(...args)
    }
  return {
    groups: () =>
      groupRuns(
        [...documents.entries()]
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([key, value]) => ({ key, value })),
      ),
    vector: (key) => vectors.get(key),
    groupDocumentIds: (store, group) =>
      [...documents.entries()]
        .filter(([key, document]) => key === documentKey(store, group, document.id))
        .map(([, document]) => document.id),
    document: documentStore.document,
    holds: documentStore.holds,
    putDocument: counted(documentStore.putDocument),
    removeDocument: (store, group, id) => {
      documentStore.removeDocument(store, group, id)
      // Its vectors with it, each a write as the LMDB layer counts them.
      const key = documentKey(store, group, id)
      vectors.delete(key)
      writesSinceRelease += 2
      if (nextModel === undefined) return
      nextVectors.delete(key)
      writesSinceRelease++
    },
    putVector: counted((key: string, hash: string, vector: Float32Array | CompactVector) => {
      vectors.set(key, { hash, vector: copyOf(vector) })
    }),
    clearVectors: async () => vectors.clear(),
    seq: (store) => seqs.get(store),
    setSeq: (store, seq) => void seqs.set(store, seq),
    model: () => model,
    setModel: (written) => {
      model = written
    },
    nextModel: () => nextModel,
    beginNextModel: async (next) => {
      nextVectors.clear()
      nextModel = next
    },
    dropNextModel: async () => {
      nextVectors.clear()
      nextModel = undefined
    },
    nextVector: (key) => nextVectors.get(key),
    putNextVector: (key, hash, vector) => void nextVectors.set(key, { hash, vector: copyOf(vector) }),
    switchToNextModel: async () => {
      if (nextModel === undefined) throw new Error("no next model to switch to")
      ;[vectors, nextVectors] = [nextVectors, vectors]
      nextVectors.clear()
      model = nextModel
      nextModel = undefined
    },
    committed: async () => undefined,
    sizeBytes: () => 0,
    compact: async () => ({ bytesBefore: 0, bytesAfter: 0 }),
    releaseMappedPages: async () => {
      writesSinceRelease = 0
    },
    writesSinceMappedPagesReleased: () => writesSinceRelease,
    close: async () => undefined,
  }
}
