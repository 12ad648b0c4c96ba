/**
 * Which stream holds each store of a shared memory now: its generation (docs/scaling.md,
 * "Deleting for good").
 *
 * A store's history starts in stream `<prefix>_<store>` (generation 0). Compacting a shared store
 * (the writer lease's holder does it, src/stores/StoreKernel.ts `compactShared`) seals that stream,
 * publishes the store's live state into a new one, `<prefix>_<store>_g<N>` on subject
 * `<prefix>.log.<store>.g<N>`, and then moves the store's pointer to it; once every live daemon has
 * switched, the sealed stream is deleted, and with it every byte of what was deleted before — a
 * purge would leave the bytes in the servers' block files and replication logs (measured on
 * nats-server 2.9.10, scaling.md).
 *
 * The pointers are entries of the JetStream KV bucket `<prefix>_generations`: key `<store>`, value
 * `{generation, retired}`, changed only by compare-and-set on the entry's revision, so of two
 * compactions racing, one moves it. `retired` lists the generations (salts, WalRecord.ts) the store's
 * streams had before: a daemon that was away during a compaction finds its checkpoint's salt there
 * and rebuilds its copy from the new stream (instead of refusing it as another history). Each daemon
 * records the generation it has switched to under `<store>.<daemon>`, which the holder waits for
 * before it deletes the sealed stream.
 */
import { JetStreamApiError } from "@nats-io/jetstream"
import { type KV, type KvEntry, Kvm } from "@nats-io/kv"
import type { Nats } from "./Nats.ts"

/** A store's generation as its pointer records it. */
export interface Generation {
  readonly generation: number
  /** The salts of the store's earlier streams (WalRecord.ts), oldest first. */
  readonly retired: ReadonlyArray<number>
  /** The entry's revision (0: no entry yet, generation 0). */
  readonly revision: number
}

/** How many earlier generations a pointer remembers (a replica away for more rejoins). */
export const retiredGenerationsMax = 64

/** The stream of `store`'s generation `generation` in the memory named `prefix`. */
export const streamNameOf = (prefix: string, store: string, generation = 0) =>
  generation === 0 ? `${prefix}_${store}` : `${prefix}_${store}_g${generation}`
/** The subject its batches are published on. */
export const subjectOf = (prefix: string, store: string, generation = 0) =>
  generation === 0 ? `${prefix}.log.${store}` : `${prefix}.log.${store}.g${generation}`
/** The generation a stream name of `store` stands for, if it is one. */
export const generationOfStream = (prefix: string, store: string, name: string): number | undefined => {
  const base = streamNameOf(prefix, store)
  if (name === base) return 0
  const match = /^_g([1-9]\d*)$/.exec(name.slice(base.length))
  return name.startsWith(base) && match !== null ? Number(match[1]) : undefined
}

const initial: Generation = { generation: 0, retired: [], revision: 0 }

const parse = (entry: KvEntry | null): Generation => {
  if (entry === null || entry.operation !== "PUT")
    return entry === null ? initial : { ...initial, revision: entry.revision }
  try {
    const value = JSON.parse(new TextDecoder().decode(entry.value)) as { generation?: unknown; retired?: unknown }
    const generation =
      typeof value.generation === "number" && Number.isSafeInteger(value.generation) ? value.generation : 0
    const retired = Array.isArray(value.retired) ? value.retired.filter((salt) => typeof salt === "number") : []
    return { generation, retired, revision: entry.revision }
  } catch {
    return { ...initial, revision: entry.revision }
  }
}

const readBuckets = new WeakMap<object, Promise<KV>>()
const writeBuckets = new WeakMap<object, Promise<KV>>()
const bucketName = (nats: Nats["Service"]) => `${nats.settings.prefix}_generations`

/**
 * The bucket of `nats`'s memory, to read: bound without asking the servers, and not created — a
 * memory never compacted has none, and opening a store then costs no request and no stream.
 */
const readBucketOf = (nats: Nats["Service"]): Promise<KV> => {
  let bucket = readBuckets.get(nats)
  if (bucket === undefined) {
    bucket = new Kvm(nats.jetstream).open(bucketName(nats))
    bucket.catch(() => readBuckets.delete(nats))
    readBuckets.set(nats, bucket)
  }
  return bucket
}

/** The bucket, to write: created the first time (by the first compaction). */
const writeBucketOf = (nats: Nats["Service"]): Promise<KV> => {
  let bucket = writeBuckets.get(nats)
  if (bucket === undefined) {
    const kvm = new Kvm(nats.jetstream)
    bucket = kvm
      .create(bucketName(nats), { history: 1, replicas: nats.replicas })
      .catch(() => kvm.open(bucketName(nats)))
    bucket.catch(() => writeBuckets.delete(nats))
    writeBuckets.set(nats, bucket)
  }
  return bucket
}

/** The bucket does not exist (yet): no store of the memory was ever compacted. */
const isMissing = (error: unknown) =>
  (error instanceof JetStreamApiError && error.code === 10059) ||
  (error instanceof Error && /stream not found/i.test(error.message))

/** The entry of `key`, `null` when it or the bucket does not exist. */
const entryOf = async (nats: Nats["Service"], key: string): Promise<KvEntry | null> => {
  try {
    return await (await readBucketOf(nats)).get(key)
  } catch (error) {
    if (isMissing(error)) return null
    throw error
  }
}

/** `store`'s generation now. */
export const currentGeneration = async (nats: Nats["Service"], store: string): Promise<Generation> =>
  parse(await entryOf(nats, store))

/** The stream that holds `store` now. */
export const currentStreamOf = async (nats: Nats["Service"], store: string): Promise<string> =>
  streamNameOf(nats.settings.prefix, store, (await currentGeneration(nats, store)).generation)

/**
 * Moves `store`'s pointer from `from` to the next generation, retiring the salt of `from`'s stream;
 * false when the pointer moved meanwhile (another compaction won).
 */
export const advanceGeneration = async (
  nats: Nats["Service"],
  store: string,
  from: Generation,
  retiredSalt: number,
): Promise<Generation | undefined> => {
  const bucket = await writeBucketOf(nats)
  const next = {
    generation: from.generation + 1,
    retired: [...from.retired, retiredSalt].slice(-retiredGenerationsMax),
  }
  const value = JSON.stringify(next)
  try {
    const revision =
      from.revision === 0 ? await bucket.create(store, value) : await bucket.update(store, value, from.revision)
    return { ...next, revision }
  } catch (error) {
    if (error instanceof Error && /wrong last sequence|key exists/.test(error.message)) return undefined
    throw error
  }
}

/** Records that this daemon serves `store` from `generation`'s stream. */
export const recordSwitched = async (nats: Nats["Service"], store: string, generation: number): Promise<void> => {
  await (await writeBucketOf(nats)).put(`${store}.${nats.settings.daemonId}`, JSON.stringify(generation))
}

/** The generation `daemon` last recorded for `store` (-1: none). */
export const switchedGeneration = async (nats: Nats["Service"], store: string, daemon: string): Promise<number> => {
  const entry = await entryOf(nats, `${store}.${daemon}`)
  if (entry === null || entry.operation !== "PUT") return -1
  try {
    const value = JSON.parse(new TextDecoder().decode(entry.value)) as unknown
    return typeof value === "number" ? value : -1
  } catch {
    return -1
  }
}

/**
 * The core NATS subject a compaction announces a store's move on. A watch of the pointer would tell
 * too, but the bucket exists only from the first compaction on, and a daemon that opened its stores
 * before it would otherwise learn of the move only by reading the pointer now and then — while the
 * compaction waits for every live daemon to switch before it deletes the sealed stream.
 */
const announcementSubjectOf = (prefix: string, store: string) => `${prefix}.generation.${store}`

/** Tells every daemon that `store`'s pointer moved (they read it and switch). */
export const announceGeneration = (nats: Nats["Service"], store: string): void =>
  nats.connection.publish(announcementSubjectOf(nats.settings.prefix, store))

/** Calls `onAnnounced` whenever a compaction announces that `store` moved; answers a stop. */
export const onGenerationAnnounced = (nats: Nats["Service"], store: string, onAnnounced: () => void): (() => void) => {
  const subscription = nats.connection.subscribe(announcementSubjectOf(nats.settings.prefix, store), {
    callback: () => onAnnounced(),
  })
  return () => subscription.unsubscribe()
}

/**
 * Calls `onChange` with `store`'s generation whenever its pointer changes; answers a stop. Fails
 * when the bucket does not exist yet (the caller looks again later: `currentGeneration`).
 */
export const watchGeneration = async (
  nats: Nats["Service"],
  store: string,
  onChange: (generation: Generation) => void,
): Promise<() => void> => {
  const watcher = await (await readBucketOf(nats)).watch({ key: store })
  void (async () => {
    for await (const entry of watcher) onChange(parse(entry))
  })().catch(() => undefined)
  return () => watcher.stop()
}
