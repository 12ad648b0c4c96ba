/**
 * A store's log as a NATS JetStream stream that every daemon of a shared memory appends to and
 * applies from (DESIGN.md §9, docs/scaling.md).
 *
 * One message per batch: the batch's records encoded as in the file log (WalRecord.ts: checksum,
 * sequence, store generation, batch flags), so a replica checks every record as recovery does. The
 * stream is `<prefix>_<store>` on subject `<prefix>.log.<store>`, file storage, N replicas.
 *
 * Fencing. A batch is decided on the state through position p (every message of the stream applied)
 * and published with `Nats-Expected-Last-Sequence: p`; a batch queued behind one still on its way is
 * published with `Nats-Expected-Last-Msg-Id` of that one. The server refuses either if anything else
 * came first (`Stale`): the batch is not in the stream and is decided again once caught up. No batch
 * decided on stale state is ever appended, so every replica's records follow gap-free.
 *
 * Retries are exactly-once: a publish without an answer (a node lost, a leader moving) is sent again
 * with the same `Nats-Msg-Id` within the stream's duplicate window; a server that had stored it
 * answers with the first one's position. After `publishRetryForMs` without an answer the batch is
 * failed `Unavailable`: it may or may not be in the stream, and if it is, it is applied when received.
 *
 * Order. An ordered consumer receives every message after the checkpoint's position, others' and
 * this daemon's own. Own batches are applied by the store when acknowledged; a received batch is
 * handed out (`takeRemote`) only when every batch before it has been applied, and an own batch still
 * waiting for its acknowledgement holds back everything after it.
 *
 * The store generation (salt) is the one the stream's first record carries: a checkpoint of an
 * earlier stream of the same name is refused (`GenerationMismatch`) instead of mixing two histories.
 * Nothing the server reports about the stream itself serves: nats-server 2.9 answers daemons that
 * create a stream at once with different `created` times, and can even confirm two creations with
 * different configurations, so neither a creation time nor a nonce in the configuration is the same
 * on every daemon. The first message is: expected-last-sequence lets one batch be position 1. A
 * daemon that opens an empty stream proposes a salt; if another's batch takes position 1, its own is
 * refused as stale and it takes that batch's salt before it decides again.
 */
import { DeliverPolicy, JetStreamApiError, StorageType } from "@nats-io/jetstream"
import { Deferred, Effect, Exit, Layer } from "effect"
import { Nats } from "../shared/Nats.ts"
import {
  advanceGeneration,
  announceGeneration,
  currentGeneration,
  type Generation,
  onGenerationAnnounced,
  recordSwitched,
  streamNameOf,
  subjectOf,
  watchGeneration,
} from "../shared/StoreGenerations.ts"
import { crc32c } from "./Crc32c.ts"
import { StoreLogs } from "./StoreLogs.ts"
import {
  type Appended,
  type OpenedWal,
  type RecoveryReport,
  type RemoteBatch,
  type SharedLog,
  type Wal,
  WalError,
  type WalStats,
} from "./Wal.ts"
import {
  batchEndFlag,
  batchStartFlag,
  encodeBatch,
  payloadLength,
  readRecordAt,
  recordHeaderBytes,
  type WalRecord,
} from "./WalRecord.ts"

/** How long one publish waits for the server's answer before it is sent again. */
export const publishAttemptMs = 2_000
/** How long a batch's publish is retried (same message id) before it is failed `Unavailable`. */
export const publishRetryForMs = 15_000
/** The stream's duplicate window: retries within it are recognised (at least `publishRetryForMs`). */
export const duplicateWindowMs = 120_000
/** How long opening waits for the messages after the checkpoint (a catch-up) before it fails. */
export const catchUpTimeoutMs = 120_000
/** How long one pull of the consumer waits for messages before the next (the client's minimum is 1 s). */
const consumeExpiresMs = 5_000
/** The server's heartbeat on an idle pull: two missed mean the consumer is lost (a node went away). */
const consumeHeartbeatMs = 1_000
/** After this long without a message while one is awaited, it is fetched directly and the consumer restarted. */
const consumerStallMs = 1_000
/** How often a replica checks how far the stream is ahead of what it received (and mends a stall). */
const lagCheckMs = 5_000
/** The pause before the consumer is started again after it ended. */
const consumerRestartMs = 250
/** Bytes of a message kept for NATS's own headers out of the server's payload limit. */
const headerRoomBytes = 4096

/** How to open a store's shared log. */
export interface JetStreamWalOptions {
  readonly nats: Nats["Service"]
  readonly store: string
  /** The last record sequence the checkpoint holds. */
  readonly replayAfterSeq: number
  /** The stream position of the last batch the checkpoint holds (0: none). */
  readonly replayAfterPosition: number
  /** The store generation the checkpoint records, if any. */
  readonly salt: number | undefined
}

/** A message received and decoded: a batch, with who appended it. */
interface Received extends RemoteBatch {
  readonly msgId: string | undefined
}

/** An own batch on its way. */
interface InFlight {
  readonly msgId: string
  readonly lastSeq: number
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const apiCode = (error: unknown): number | undefined => (error instanceof JetStreamApiError ? error.code : undefined)

/** A salt proposed for an empty stream: from its name, creation time and this daemon's run, never 0. */
const proposedSalt = (name: string, created: string, runId: string): number =>
  crc32c(Buffer.from(`${name}\u0000${created}\u0000${runId}`)) || 1

/** Opens (and, the first time, creates) the stream of `options.store`, catching up from the checkpoint. */
export const openJetStreamWal = (options: JetStreamWalOptions): Effect.Effect<OpenedWal, WalError> =>
  Effect.tryPromise({
    try: () => openShared(options),
    catch: (error) =>
      error instanceof WalError
        ? error
        : new WalError({
            reason: "Unavailable",
            message: `${describe(options)}: ${error instanceof Error ? error.message : String(error)}`,
          }),
  })

const describe = (options: JetStreamWalOptions, generation = 0) =>
  `stream ${streamNameOf(options.nats.settings.prefix, options.store, generation)} on NATS ${options.nats.settings.servers.join(", ")}`

/** The first record of the message at `at` in stream `name`: its sequence and store generation. */
const firstRecordAt = async (
  nats: Nats["Service"],
  name: string,
  at: number,
): Promise<{ readonly seq: number; readonly salt: number } | undefined> => {
  const stored = await nats.manager.streams.getMessage(name, { seq: at })
  if (stored === null) return undefined
  const data = stored.data
  const read = readRecordAt(Buffer.from(data.buffer, data.byteOffset, data.byteLength), 0)
  return read._tag === "Record" ? { seq: read.record.seq, salt: read.salt } : undefined
}

const openShared = async (options: JetStreamWalOptions): Promise<OpenedWal> => {
  const { nats, store } = options
  const pointer = await currentGeneration(nats, store)
  const generation = pointer.generation
  const name = streamNameOf(nats.settings.prefix, store, generation)
  const subject = subjectOf(nats.settings.prefix, store, generation)
  const where = describe(options, generation)
  const info = await ensureStream(nats, name, subject)
  const daemonId = nats.settings.daemonId
  const runId = `${daemonId}.${Date.now().toString(36)}`
  const firstSeq = info.state.first_seq
  const first = info.state.messages > 0 ? await firstRecordAt(nats, name, firstSeq) : undefined
  if (info.state.messages > 0 && first === undefined)
    throw new WalError({ reason: "Corrupt", message: `${where}: its first message, at ${firstSeq}, is not a record` })
  /** The stream's store generation: its first record's; proposed until the stream has one. */
  let salt = first?.salt ?? proposedSalt(name, info.created, runId)
  let saltSettled = first !== undefined
  // A checkpoint of a stream a compaction retired: this copy is rebuilt from the current one, which
  // holds the whole state (its first messages are the compaction's snapshot).
  const rebuild =
    options.salt !== undefined &&
    options.salt !== salt &&
    options.replayAfterPosition > 0 &&
    pointer.retired.includes(options.salt)
  if (options.salt !== undefined && options.salt !== salt && options.replayAfterPosition > 0 && !rebuild) {
    throw new WalError({
      reason: "GenerationMismatch",
      message: `${where} was created anew since this data directory last applied it (position ${options.replayAfterPosition}): its local copy belongs to an earlier stream; join the shared memory again (docs/scaling.md)`,
    })
  }
  const replayAfterPosition = rebuild ? 0 : options.replayAfterPosition
  if (info.state.messages > 0 && firstSeq > replayAfterPosition + 1) {
    throw new WalError({
      reason: "Corrupt",
      message: `${where} starts at position ${firstSeq}, but this data directory has applied it only through ${replayAfterPosition}: messages are missing (was the stream purged?)`,
    })
  }

  let position = replayAfterPosition
  // From the stream's start, record sequences go on from where the stream's first record says: a
  // compacted store's stream continues the sequences of the one it replaced.
  let nextSeq = position === 0 && first !== undefined ? first.seq : options.replayAfterSeq + 1
  const replayAfterSeq = nextSeq - 1
  /** The record sequence after the last batch received (validates that received batches follow on). */
  let receivedNextSeq = nextSeq
  let receivedThrough = position
  let broken: WalError | undefined
  /** Set once the store's pointer names a newer generation (a compaction moved the store on). */
  let movedTo: number | undefined
  const received = new Map<number, Received>()
  const inFlight: Array<InFlight> = []
  let counter = 0
  let appends = 0
  /** Appends refused because another daemon appended first (each is decided again). */
  let refused = 0
  let wake: () => void = () => undefined
  const waiters: Array<{ readonly through: number; readonly done: () => void }> = []

  const settleWaiters = () => {
    for (const waiter of [...waiters])
      if (broken !== undefined || movedTo !== undefined || receivedThrough >= waiter.through) waiter.done()
  }

  const decode = (position: number, data: Uint8Array, msgId: string | undefined): Received | WalError => {
    const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
    const records: Array<WalRecord> = []
    let offset = 0
    let seq = receivedNextSeq
    const corrupt = (why: string) =>
      new WalError({ reason: "Corrupt", message: `${where}, position ${position}: ${why}`, position })
    while (offset < bytes.length) {
      const read = readRecordAt(bytes, offset)
      if (read._tag !== "Record") return corrupt(read._tag === "Bad" ? read.why : "a partial record")
      if (!saltSettled) {
        // The stream's first batch: its salt is the stream's (an own batch that lost position 1 to it
        // is refused as stale, and decided again with this salt).
        salt = read.salt
        saltSettled = true
      }
      if (read.salt !== salt) return corrupt("a record of another store generation")
      if (read.record.seq !== seq) return corrupt(`record sequence ${read.record.seq} where ${seq} was expected`)
      records.push(read.record)
      offset = read.end
      seq++
    }
    if (records.length === 0) return corrupt("an empty batch")
    if (!(records[0]!.flags & batchStartFlag) || !(records[records.length - 1]!.flags & batchEndFlag))
      return corrupt("not a whole batch")
    const origin = msgId?.split(".")[0] ?? "unknown"
    const last = records.length - 1
    records[last] = { ...records[last]!, position, origin }
    receivedNextSeq = seq
    return { position, records, origin, msgId }
  }

  /**
   * Takes in the message at `at`, from the consumer or a direct get, if it is the next one (anything
   * else was received already, or comes after a gap the next one fills first).
   */
  const accept = (at: number, data: Uint8Array, msgId: string | undefined): void => {
    if (broken !== undefined || at !== receivedThrough + 1) return
    const batch = decode(at, data, msgId)
    if (batch instanceof WalError) {
      broken = batch
      settleWaiters()
      return
    }
    // An own batch acknowledged before it came back is applied already.
    if (batch.position > position) received.set(batch.position, batch)
    receivedThrough = batch.position
    lastReceivedAt = Date.now()
    settleWaiters()
    wake()
  }

  // The consumer: every message after what is received, in order. It is started again (from what
  // is received) when it ends or stalls: a server that went away takes its consumer with it.
  let closed = false
  let lastReceivedAt = Date.now()
  let current: { readonly stop: () => void } | undefined
  void (async () => {
    while (!closed && broken === undefined) {
      try {
        const consumer = await nats.jetstream.consumers.get(name, {
          deliver_policy: DeliverPolicy.StartSequence,
          opt_start_seq: receivedThrough + 1,
        })
        // Short pulls and heartbeats: a lost consumer is noticed within seconds.
        const messages = await consumer.consume({ expires: consumeExpiresMs, idle_heartbeat: consumeHeartbeatMs })
        current = { stop: () => void messages.stop() }
        if (closed) messages.stop()
        for await (const message of messages) {
          accept(message.seq, message.data, message.headers?.get("Nats-Msg-Id") || undefined)
          if (closed || broken !== undefined) break
        }
      } catch {
        // Not reachable now: try again shortly.
      }
      current = undefined
      if (!closed) await sleep(consumerRestartMs)
    }
    settleWaiters()
  })()

  /** Fetches the messages after what is received, through `through`, one by one (the consumer lags). */
  const fetchDirectly = async (through: number) => {
    while (receivedThrough < through && broken === undefined && !closed) {
      const at = receivedThrough + 1
      const stored = await nats.manager.streams.getMessage(name, { seq: at })
      if (stored === null) return
      accept(at, stored.data, stored.header?.get("Nats-Msg-Id") || undefined)
    }
  }

  // The lag watchdog: an idle replica has nobody waiting for messages, so it looks for itself how far
  // the stream is ahead; a consumer that stopped delivering is started again and the gap fetched.
  let streamLast = info.state.last_seq
  let sealed = info.config.sealed === true
  const watchdog = setInterval(() => {
    void nats.manager.streams
      .info(name)
      .then(async (latest) => {
        streamLast = latest.state.last_seq
        sealed = latest.config.sealed === true
        if (streamLast > receivedThrough && Date.now() - lastReceivedAt >= lagCheckMs) {
          current?.stop()
          await fetchDirectly(streamLast)
        }
      })
      .catch(() => undefined)
  }, lagCheckMs)
  watchdog.unref()

  // The store's pointer (StoreGenerations.ts): a compaction moved the store to a newer stream. The
  // actor is woken to switch (it reopens the store from the pointer's stream).
  const noteGeneration = (latest: Generation) => {
    if (latest.generation <= generation || (movedTo !== undefined && movedTo >= latest.generation)) return
    movedTo = latest.generation
    settleWaiters()
    wake()
  }
  // The watch needs the bucket, which the first compaction of the memory creates: until it exists
  // (and across a reconnect, which a watch can miss a change over), the pointer is read now and then.
  let stopWatching: (() => void) | undefined
  let watching = false
  const watchPointer = async () => {
    if (watching) return
    watching = true
    await watchGeneration(nats, store, noteGeneration).then(
      (stop) => {
        if (closed) stop()
        else stopWatching = stop
      },
      () => {
        watching = false
      },
    )
  }
  if (pointer.revision > 0) await watchPointer()
  const readPointer = () => {
    void currentGeneration(nats, store)
      .then(async (latest) => {
        noteGeneration(latest)
        if (stopWatching === undefined && latest.revision > 0) await watchPointer()
      })
      .catch(() => undefined)
  }
  const pointerCheck = setInterval(readPointer, lagCheckMs)
  pointerCheck.unref()
  // A compaction announces the move at once (the watch may not run yet: the bucket is its doing).
  const stopListening = onGenerationAnnounced(nats, store, readPointer)

  /**
   * Resolves once every message through `through` is received: from the consumer, or, when it has
   * delivered nothing for `consumerStallMs`, fetched directly (and the consumer started again).
   */
  const received$ = async (through: number, timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs
    while (receivedThrough < through) {
      if (broken !== undefined) throw broken
      if (movedTo !== undefined) return // what is awaited is in the newer stream's snapshot
      if (closed) throw new WalError({ reason: "Unavailable", message: `${where}: the log is closed` })
      if (Date.now() >= deadline)
        throw new WalError({
          reason: "Unavailable",
          message: `${where}: position ${through} was not received within ${timeoutMs / 1000} s (received through ${receivedThrough})`,
        })
      const progressed = await new Promise<boolean>((resolve) => {
        const waiter = {
          through: receivedThrough + 1,
          done: () => {
            clearTimeout(timer)
            waiters.splice(waiters.indexOf(waiter), 1)
            resolve(true)
          },
        }
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1)
          resolve(false)
        }, consumerStallMs)
        waiters.push(waiter)
      })
      if (progressed) continue
      if (Date.now() - lastReceivedAt >= consumerStallMs) current?.stop()
      await fetchDirectly(through).catch(() => undefined)
    }
  }

  /** Stops the consumer, the timers and the subscriptions (at close, or when the open fails). */
  const stop = () => {
    closed = true
    clearInterval(watchdog)
    clearInterval(pointerCheck)
    stopListening()
    stopWatching?.()
    current?.stop()
  }

  // Catch up: everything the stream held when opened is the replay. An open that fails leaves no
  // consumer behind (a store that retries its open would gather one per attempt).
  const lastAtOpen = info.state.last_seq
  if (lastAtOpen > position)
    await received$(lastAtOpen, catchUpTimeoutMs).catch((error: unknown) => {
      stop()
      throw error
    })
  const replay: Array<WalRecord> = []
  for (let next = received.get(position + 1); next !== undefined; next = received.get(position + 1)) {
    received.delete(next.position)
    replay.push(...next.records)
    position = next.position
    nextSeq = next.records[next.records.length - 1]!.seq + 1
  }

  const takeRemote = (): ReadonlyArray<RemoteBatch> => {
    const taken: Array<RemoteBatch> = []
    for (let next = received.get(position + 1); next !== undefined; next = received.get(position + 1)) {
      // An own batch waiting for its acknowledgement holds back what follows it.
      if (next.msgId !== undefined && inFlight.some((own) => own.msgId === next!.msgId)) break
      received.delete(next.position)
      position = next.position
      nextSeq = next.records[next.records.length - 1]!.seq + 1
      taken.push(next)
    }
    return taken
  }

  /** Publishes one batch, retrying with the same message id until answered or out of time. */
  const publish = async (payload: Buffer, msgId: string, expect: { lastSequence: number } | { lastMsgID: string }) => {
    const deadline = Date.now() + publishRetryForMs
    for (let attempt = 0; ; attempt++) {
      try {
        return await nats.jetstream.publish(subject, payload, {
          msgID: msgId,
          expect,
          timeout: publishAttemptMs,
        })
      } catch (error) {
        const code = apiCode(error)
        if (code === 10071 || code === 10070) refused++
        if (code === 10109)
          throw new WalError({
            reason: "Unavailable",
            message: `${where} is sealed: a compaction is moving the store to a new stream; nothing was stored, retry in a moment`,
          })
        if (code === 10071) {
          const last = /wrong last sequence: (\d+)/.exec(error instanceof Error ? error.message : "")
          throw new WalError({
            reason: "Stale",
            message: `${where}: another daemon appended first`,
            ...(last !== null ? { position: Number(last[1]) } : {}),
          })
        }
        if (code === 10070) throw new WalError({ reason: "Stale", message: `${where}: another daemon appended first` })
        if (code !== undefined || Date.now() >= deadline) {
          throw new WalError({
            reason: "Unavailable",
            message: `${where} did not confirm a write within ${publishRetryForMs / 1000} s (${error instanceof Error ? error.message : String(error)}); it may or may not be stored: a retry of the same request is applied once`,
          })
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(1000, 100 * 2 ** attempt)))
      }
    }
  }

  const queueBatch: Wal["queueBatch"] = (entries) =>
    Effect.suspend(() => {
      if (broken !== undefined) return Effect.fail(broken)
      const unavailable = nats.unavailable()
      if (unavailable !== undefined) return Effect.fail(new WalError({ reason: "Unavailable", message: unavailable }))
      let byteCount = 0
      for (const entry of entries) byteCount += recordHeaderBytes + payloadLength(entry.payload)
      if (byteCount > batchBytesMax) {
        return Effect.fail(
          new WalError({
            reason: "RecordTooLarge",
            message: `a batch of ${byteCount} bytes exceeds the ${batchBytesMax} bytes one NATS message holds`,
          }),
        )
      }
      const firstSeq = nextSeq
      const buffer = encodeBatch(entries, firstSeq, salt, byteCount)
      const lastSeq = firstSeq + entries.length - 1
      nextSeq = lastSeq + 1
      const msgId = `${runId}.${store}.${++counter}`
      const behind = inFlight[inFlight.length - 1]
      const expect = behind === undefined ? { lastSequence: position } : { lastMsgID: behind.msgId }
      const own: InFlight = { msgId, lastSeq }
      inFlight.push(own)
      appends++
      const done = Deferred.makeUnsafe<Appended, WalError>()
      let payloadBytes = 0
      for (const entry of entries) payloadBytes += payloadLength(entry.payload)
      publish(buffer, msgId, expect).then(
        (ack) => {
          inFlight.splice(inFlight.indexOf(own), 1)
          // Appended on what was received, or first: the salt it carries is the stream's.
          saltSettled = true
          position = ack.seq
          received.delete(ack.seq)
          Deferred.doneUnsafe(done, Exit.succeed({ firstSeq, lastSeq, payloadBytes, position: ack.seq }))
          wake()
        },
        (error: unknown) => {
          inFlight.splice(inFlight.indexOf(own), 1)
          // Nothing after the last acknowledged batch is this daemon's any more: sequences restart
          // from what is applied (received batches, own or not, are applied in order when taken).
          nextSeq = Math.min(nextSeq, firstSeq)
          const failure =
            error instanceof WalError
              ? error
              : new WalError({ reason: "Unavailable", message: `${where}: ${String(error)}` })
          Deferred.doneUnsafe(done, Exit.fail(failure))
          wake()
        },
      )
      return Effect.succeed(Deferred.await(done))
    })

  const toWal = <A>(run: () => Promise<A>) =>
    Effect.tryPromise({
      try: run,
      catch: (error) =>
        error instanceof WalError
          ? error
          : new WalError({
              reason: "Unavailable",
              message: `${where}: ${error instanceof Error ? error.message : String(error)}`,
            }),
    })

  const shared: SharedLog = {
    self: daemonId,
    takeRemote,
    onRemote: (callback) => {
      wake = callback
      // What arrived before anyone listened (between the open's catch-up and this call, or a move
      // to a newer stream noticed meanwhile) would otherwise wait for the next message.
      if (received.has(position + 1) || movedTo !== undefined) callback()
    },
    awaitReceived: (through) =>
      toWal(async () => {
        const target = through ?? (await nats.manager.streams.info(name)).state.last_seq
        await received$(target, catchUpTimeoutMs)
      }),
    position: () => position,
    generation,
    movedTo: () => movedTo,
    refreshGeneration: () => toWal(async () => noteGeneration(await currentGeneration(nats, store))),
    seal: () =>
      toWal(async () => {
        const latest = await nats.manager.streams.info(name)
        const config = { ...latest.config, sealed: true }
        const after = latest.config.sealed ? latest : await nats.manager.streams.update(name, config)
        sealed = true
        return after.state.last_seq
      }),
    startNextGeneration: (entries, snapshotRecordType) =>
      toWal(async () => {
        const pointer = await currentGeneration(nats, store)
        if (pointer.generation !== generation)
          throw new WalError({
            reason: "Stale",
            message: `${where}: the store moved to generation ${pointer.generation} meanwhile (another daemon compacted it)`,
          })
        const next = generation + 1
        // What an interrupted compaction left (the pointer never named it) goes first.
        await nats.manager.streams.delete(streamNameOf(nats.settings.prefix, store, next)).catch(() => undefined)
        const published = await publishSnapshotTo(nats, store, next, nextSeq, entries, snapshotRecordType)
        const moved = await advanceGeneration(nats, store, pointer, salt)
        if (moved === undefined) {
          await nats.manager.streams.delete(streamNameOf(nats.settings.prefix, store, next)).catch(() => undefined)
          throw new WalError({ reason: "Stale", message: `${where}: another daemon compacted the store meanwhile` })
        }
        noteGeneration(moved)
        announceGeneration(nats, store)
        return { ...published, generation: next, retired: name }
      }),
    describe: () => where,
    unavailable: () => (broken !== undefined ? broken.message : nats.unavailable()),
  }

  const batchBytesMax = Math.max(64 * 1024, (nats.connection.info?.max_payload ?? 1024 * 1024) - headerRoomBytes)
  const stats = (): WalStats => ({
    segments: 0,
    bytes: 0,
    appends,
    fsyncs: 0,
    nextSeq,
    salt,
    position,
    lag: Math.max(0, Math.max(streamLast, receivedThrough) - position),
    refused,
    generation,
    sealed,
  })
  const wal: Wal = {
    queueBatch,
    appendBatch: (entries) => Effect.flatten(queueBatch(entries)),
    // The stream keeps the history; nothing is rotated or released locally.
    rotate: () => Effect.void,
    releaseThrough: () => Effect.succeed(0),
    stats,
    close: () => Effect.sync(stop),
    batchBytesMax,
    shared,
  }
  const report: RecoveryReport = {
    segments: 0,
    records: replay.length,
    firstSeq: replayAfterSeq + 1,
    lastSeq: nextSeq - 1,
    discardedRecords: 0,
    // The kernel discards the retired stream's checkpoint and loads this one from its start.
    ...(rebuild ? { snapshot: { firstSeq: replayAfterSeq + 1, lastSeq: nextSeq - 1 } } : {}),
  }
  if (generation > 0) await recordSwitched(nats, store, generation).catch(() => undefined)
  return { wal, replay, report }
}

/** The stream's info, creating it (file storage, the daemon's replicas) when it does not exist yet. */
const ensureStream = async (nats: Nats["Service"], name: string, subject: string) => {
  try {
    return await nats.manager.streams.info(name)
  } catch (error) {
    if (apiCode(error) !== 10059) throw error // anything but "stream not found"
  }
  try {
    return await nats.manager.streams.add({
      name,
      subjects: [subject],
      storage: StorageType.File,
      num_replicas: nats.replicas,
      duplicate_window: duplicateWindowMs * 1_000_000,
    })
  } catch (error) {
    if (apiCode(error) === 10058) return await nats.manager.streams.info(name) // another daemon created it
    throw error
  }
}

/** Every store's log in the shared memory the daemon's NATS connection names. */
export const jetStreamLogs: Layer.Layer<StoreLogs, never, Nats> = Layer.effect(
  StoreLogs,
  Effect.gen(function* () {
    const nats = yield* Nats
    return StoreLogs.of({
      shared: true,
      open: (options) =>
        openJetStreamWal({
          nats,
          store: options.store,
          replayAfterSeq: options.replayAfterSeq,
          replayAfterPosition: options.replayAfterPosition ?? 0,
          salt: options.salt,
        }),
    })
  }),
)

/** What `publishSnapshot` sent. */
export interface PublishedSnapshot {
  readonly entries: number
  readonly messages: number
  readonly bytes: number
}

/**
 * Moves a local store into the empty stream of a shared memory: its whole state, as snapshot records
 * (kernel record type `snapshotRecordType`, `[[key, value], ...]`), in as many messages as the
 * server's payload limit needs, each a batch of its own, chained (the first expects an empty stream,
 * each next one the one before). Every replica loads them as it applies any batch. Fails when the stream
 * is not empty; when a publish fails, deletes the (empty before) stream again, so nothing half moved in
 * stays. Every entry must fit one NATS message (the server's max_payload).
 */
export const publishSnapshot = async (
  nats: Nats["Service"],
  store: string,
  entries: Iterable<readonly [string, unknown]>,
  snapshotRecordType: number,
): Promise<PublishedSnapshot> =>
  publishSnapshotTo(nats, store, (await currentGeneration(nats, store)).generation, 1, entries, snapshotRecordType)

/**
 * Publishes `entries` as snapshot batches into the empty stream of `store`'s generation
 * `generation` (created here), its records numbered from `firstSeq` (see `publishSnapshot`).
 */
const publishSnapshotTo = async (
  nats: Nats["Service"],
  store: string,
  generation: number,
  firstSeq: number,
  entries: Iterable<readonly [string, unknown]>,
  snapshotRecordType: number,
): Promise<PublishedSnapshot> => {
  const name = streamNameOf(nats.settings.prefix, store, generation)
  const subject = subjectOf(nats.settings.prefix, store, generation)
  const info = await ensureStream(nats, name, subject)
  if (info.state.messages > 0 || info.state.last_seq > 0)
    throw new Error(
      `stream ${name} already holds ${info.state.messages} message(s): only an empty stream takes a local store`,
    )
  // The first record's salt is the stream's (an empty stream was expected: this batch is position 1).
  const salt = proposedSalt(name, info.created, `${nats.settings.daemonId}.snapshot`)
  const messageBytesMax = Math.max(64 * 1024, (nats.connection.info?.max_payload ?? 1024 * 1024) - headerRoomBytes)
  const recordBytesMax = Math.min(256 * 1024, messageBytesMax - recordHeaderBytes)
  const runId = `${nats.settings.daemonId}.snapshot${Date.now().toString(36)}`
  let seq = firstSeq
  let messages = 0
  let bytes = 0
  let count = 0
  let lastMsgId: string | undefined
  let records: Array<string> = []
  let recordsBytes = 0
  let chunk: Array<readonly [string, unknown]> = []
  let chunkBytes = 2
  const send = async () => {
    if (records.length === 0) return
    const buffer = encodeBatch(
      records.map((payload) => ({ type: snapshotRecordType, payload })),
      seq,
      salt,
      recordsBytes,
    )
    seq += records.length
    const msgId = `${runId}.${++messages}`
    await nats.jetstream.publish(subject, buffer, {
      msgID: msgId,
      expect: lastMsgId === undefined ? { lastSequence: 0 } : { lastMsgID: lastMsgId },
      timeout: publishRetryForMs,
    })
    lastMsgId = msgId
    bytes += buffer.length
    records = []
    recordsBytes = 0
  }
  const closeRecord = async () => {
    if (chunk.length === 0) return
    const payload = JSON.stringify(chunk)
    const size = recordHeaderBytes + Buffer.byteLength(payload)
    if (recordsBytes + size > messageBytesMax) await send()
    records.push(payload)
    recordsBytes += size
    chunk = []
    chunkBytes = 2
  }
  try {
    for (const entry of entries) {
      const size = Buffer.byteLength(JSON.stringify(entry)) + 1
      if (chunkBytes + size > recordBytesMax) await closeRecord()
      chunk.push(entry)
      chunkBytes += size
      count++
    }
    await closeRecord()
    await send()
  } catch (error) {
    await nats.manager.streams.delete(name).catch(() => undefined)
    throw error
  }
  return { entries: count, messages, bytes }
}
