/**
 * Whether a data directory is a replica of a shared memory (NATS JetStream), and which.
 *
 * `<dataDir>/shared-memory.json` records the membership: the memory's name (the streams' prefix), the
 * servers it was joined on, this daemon's id, and when. It is written when a data directory joins
 * (`mnemos cluster join`, or the first `serve --nats` of an empty data directory) and removed when it
 * leaves (`mnemos cluster leave`). It guards against mixing histories: a data directory holding a
 * local memory never silently starts replicating another one, and a replica never silently starts
 * writing a local log of its own.
 *
 * `cluster join` sets the local stores aside in `<dataDir>/pre-join-<time>/` until the join is
 * confirmed: once the replica's first start has opened every store from the streams (which hold
 * the same state), the copies are removed (`removePreJoinCopies`) — they hold whatever was deleted
 * since, in no file a compaction rewrites.
 */
import { randomBytes } from "node:crypto"
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { hostname } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { writeFileAtomic } from "../../cli/AtomicFile.ts"
import { recordHeaderBytes, segmentHeaderBytes } from "../wal/WalRecord.ts"

/** The membership file's name. */
export const membershipFileName = "shared-memory.json"

/** What the membership file records. */
export interface Membership {
  readonly prefix: string
  readonly servers: ReadonlyArray<string>
  readonly daemonId: string
  readonly joinedAt: string
}

const membershipPath = (dataDir: string) => join(dataDir, membershipFileName)

/** The data directory's membership, if it is a replica. */
export const readMembership = (dataDir: string): Membership | undefined => {
  try {
    const value = JSON.parse(readFileSync(membershipPath(dataDir), "utf8")) as Partial<Membership>
    return typeof value.prefix === "string" && Array.isArray(value.servers) && typeof value.daemonId === "string"
      ? (value as Membership)
      : undefined
  } catch {
    return undefined
  }
}

/** Records the membership (atomically, mode 0600). */
export const writeMembership = (dataDir: string, membership: Membership): void =>
  writeFileAtomic(membershipPath(dataDir), [`${JSON.stringify(membership, null, 2)}\n`])

/** Forgets it: the data directory is local again. */
export const removeMembership = (dataDir: string): void => rmSync(membershipPath(dataDir), { force: true })

/** Where `cluster join` sets a data directory's local stores aside. */
export const preJoinCopyPrefix = "pre-join-"

/** The `pre-join-*` copies of the data directory (their names). */
export const preJoinCopies = (dataDir: string): ReadonlyArray<string> => {
  try {
    return readdirSync(dataDir).filter((name) => name.startsWith(preJoinCopyPrefix))
  } catch {
    return []
  }
}

/** Removes the `pre-join-*` copies; answers the names removed. */
export const removePreJoinCopies = (dataDir: string): ReadonlyArray<string> => {
  const copies = preJoinCopies(dataDir)
  for (const name of copies) rmSync(join(dataDir, name), { recursive: true, force: true })
  return copies
}

/** A new daemon id: the host's name (letters, digits and `-` only) and a random suffix. */
export const newDaemonId = (): string => {
  const host = hostname()
    .replace(/[^A-Za-z0-9-]/g, "-")
    .slice(0, 40)
  return `${host || "mnemos"}-${randomBytes(3).toString("hex")}`
}

/**
 * The stores of the data directory that hold records: an applied sequence in LMDB, or a log segment
 * with a record in it. (Opened and closed unwritten, a store holds nothing.)
 */
export const storesHoldingData = (dataDir: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function* () {
    const stores = join(dataDir, "stores")
    if (!existsSync(stores)) return []
    const holding: Array<string> = []
    for (const store of readdirSync(stores)) {
      const dir = join(stores, store)
      const wal = join(dir, "wal")
      const segments = existsSync(wal) ? readdirSync(wal).filter((name) => name.endsWith(".log")) : []
      const logged = segments.some((name) => statSync(join(wal, name)).size > segmentHeaderBytes + recordHeaderBytes)
      // Loaded on use: it reads the checkpoint with LMDB, which the shim (reading membership) never needs.
      const { readCheckpointSeq } = yield* Effect.promise(() => import("../wal/WalRepair.ts"))
      const checkpoint = yield* Effect.result(readCheckpointSeq(dir))
      if (logged || (checkpoint._tag === "Success" && checkpoint.success.appliedSeq > 0)) holding.push(store)
    }
    return holding
  })
