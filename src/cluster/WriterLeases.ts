/**
 * One writer per store in a shared memory: a writer lease per store, and every other daemon's
 * writes forwarded to its holder (docs/scaling.md, "One writer per store").
 *
 * The lease. Each store's lease is an entry of the JetStream KV bucket `<prefix>_leases` (key: the
 * store's name, value: `{holder}`), changed only by compare-and-set on the entry's revision (KV
 * `create`/`update`, which nats-server 2.9 checks with `Nats-Expected-Last-Subject-Sequence`). The
 * holder renews it every third of `leaseMs`. Time is never compared across machines: the holder
 * counts its lease from when it *sent* the renewal that was stored (so it ends before the renewal
 * was even stored, plus `leaseMs`), and another daemon counts a lease as lapsed only when it has
 * seen no change of the entry for `leaseMs + takeoverGraceMs` of its own clock since it first saw
 * the current revision (which is after that renewal was stored). So a holder stops deciding writes
 * before anyone may take its lease, as long as the two clocks' rates differ by less than the
 * grace over the lease. A lapsed (or released) lease is taken by compare-and-set on the revision
 * seen: of two daemons trying, one wins.
 *
 * Which daemon takes which lease: the daemons announced live on `<prefix>.presence`
 * (Presence.ts) rank the stores by rendezvous hashing (store and daemon id), so the leases spread
 * over the daemons and each store has one preferred daemon. A free or lapsed lease is taken by its
 * preferred daemon (any daemon after twice the lease, should the preferred one not come); a holder
 * that is not the preferred one while the preferred one is live hands its lease over (it stops
 * deciding, then releases the entry), so leases move to a daemon that joins; a daemon that stops
 * releases its leases, and one killed loses them when they lapse. A store that cannot serve writes
 * here (corrupt, unavailable, still opening) is neither taken nor kept.
 *
 * Forwarding. A write on a daemon that does not hold the store's lease is sent to the holder over
 * NATS request/reply (`<prefix>.fwd.<store>.<holder>`): the command encoded with the store's
 * schema and an idempotency key (the caller's, or one made here), so a forward that is sent again
 * — no answer, the holder gone, the lease moved — is applied once, by whichever daemon holds the
 * lease then (the key's record is in the stream). The holder sends it to its store like its own
 * writes (batched with them) and answers once the stream's quorum has it and it is applied there,
 * with the stream position it had applied; the forwarding daemon answers its caller once it has
 * applied through that position too (read your writes). A forwarded domain refusal comes back as
 * the same refusal (the store's failure schema).
 *
 * Expected-last-sequence fencing (JetStreamWal.ts) stays underneath: a deposed holder's append
 * decided on stale state is refused, so nothing it decides after its successor's first append is
 * stored; the store actor asks the lease (`writeGate`) before each batch, and a batch refused as
 * stale is decided again only while the lease is still held here.
 */
import { randomBytes } from "node:crypto"
import { JetStreamApiError } from "@nats-io/jetstream"
import { type KV, Kvm } from "@nats-io/kv"
import type { Msg } from "@nats-io/transport-node"
import { Cause, Effect, Exit, Layer, Schema, type Scope } from "effect"
import type { Store, StoreHealth } from "../actors/StoreActor.ts"
import { WriteRouting, type WriterView } from "../actors/WriteRouting.ts"
import type { StoreDefinition } from "../stores/StoreDefinition.ts"
import { StoreError } from "../stores/StoreError.ts"
import type { CompactionReport } from "../stores/StoreKernel.ts"
import { Nats } from "../stores/shared/Nats.ts"
import { defaultLeaseMs } from "../stores/shared/NatsSettings.ts"
import { currentGeneration, generationOfStream, switchedGeneration } from "../stores/shared/StoreGenerations.ts"

/** Beyond the lease, how long a lapsed lease is left before another daemon takes it. */
export const takeoverGraceMs = 500
/** How long one forward waits for the holder's answer before it is sent again (same key). */
const forwardAttemptMs = 5_000
/**
 * How long a write keeps being forwarded — through a holder's death and its lease's takeover —
 * before it fails `Unavailable`: the holder's own append retries for 15 s (JetStreamWal.ts).
 */
const forwardForMsBeyondLease = 20_000
/** A daemon is live while its presence heartbeat is younger than this (Presence.ts's `liveWithinMs`). */
const liveWithinMs = 6_000
/** A holder hands its lease to the preferred daemon only after holding it this many leases. */
const handOverAfterLeases = 2
/** Between a holder closing its gate and releasing the entry: lets a batch in flight finish. */
const releasePauseMs = 100

/** How long the holder waits for every live daemon to switch to a compacted store's new stream. */
const switchWaitMs = 30_000
/** How long a compaction sent to the holder may take (it rewrites the store's stream). */
const compactForwardMs = 180_000
/** A holder finding its store's stream sealed (a compaction cut short) compacts again at most this often. */
const resumeCompactionEveryMs = 10_000

/** What a forward carries: a command, or a compaction. */
type ForwardRequest =
  | { readonly command: unknown; readonly key: string; readonly compact?: undefined }
  | { readonly compact: true }

/** What the holder answers. */
type ForwardAnswer =
  | { readonly ok: unknown; readonly position: number }
  | { readonly compacted: CompactionReport; readonly position: number }
  | { readonly failure: unknown }
  | { readonly error: { readonly reason: StoreError["reason"]; readonly message: string } }
  | { readonly notWriter: string }

/** One store's lease, as this daemon knows it. */
interface Lease {
  readonly store: string
  /** The entry's revision seen last (0: no entry yet). */
  revision: number
  holder: string | undefined
  /** When (this daemon's monotonic clock) the current revision was first seen. */
  seenAt: number
  /** Held here: this daemon may decide until then (monotonic clock). */
  validUntil: number
  /** When this daemon took it (monotonic), for the hand-over's minimum hold. */
  heldSince: number
  releasing: boolean
  /** Called (once each) at the lease's next change: forwards and the lease's loop waiting for it. */
  readonly wakers: Set<() => void>
  forwarded: number
  served: number
  /** A compaction run here is on its way (and when the last began, monotonic). */
  compacting: boolean
  compactionStartedAt: number
}

/** Rendezvous hashing: the daemon of `candidates` ranked first for `store` (FNV-1a over both names). */
export const preferredDaemon = (store: string, candidates: Iterable<string>): string | undefined => {
  let best: string | undefined
  let bestScore = -1
  for (const daemon of candidates) {
    let hash = 0x811c9dc5
    for (const char of `${store}\u0000${daemon}`) {
      hash ^= char.charCodeAt(0)
      hash = Math.imul(hash, 0x01000193) >>> 0
    }
    // Mixed again (murmur3's finaliser): FNV's last bytes alone would decide the rank.
    hash ^= hash >>> 16
    hash = Math.imul(hash, 0x85ebca6b) >>> 0
    hash = (hash ^ (hash >>> 13)) >>> 0 // unsigned: `^=` gives a signed int32, and a negative score never beat -1
    if (hash > bestScore || (hash === bestScore && best !== undefined && daemon < best)) {
      best = daemon
      bestScore = hash
    }
  }
  return best
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const apiCode = (error: unknown): number | undefined => (error instanceof JetStreamApiError ? error.code : undefined)

const isWrongRevision = (error: unknown) => error instanceof Error && /wrong last sequence/.test(error.message)

/** The write routing of a shared memory, over its NATS connection. */
export const makeWriterLeases: Effect.Effect<WriteRouting["Service"], never, Nats | Scope.Scope> = Effect.gen(
  function* () {
    const nats = yield* Nats
    const { prefix, daemonId } = nats.settings
    const leaseMs = nats.settings.leaseMs ?? defaultLeaseMs
    const renewMs = leaseMs / 3
    const runId = `${daemonId}.${Date.now().toString(36)}.${randomBytes(3).toString("hex")}`
    let keyCounter = 0
    let closing = false
    const leases = new Map<string, Lease>()
    // biome-ignore lint/suspicious/noExplicitAny: the registry erases each store's own types
    const local = new Map<string, { definition: StoreDefinition<any, any, any, any>; store: Store<any, any, any> }>()

    const bucketName = `${prefix}_leases`
    const kvm = new Kvm(nats.jetstream)
    const kv: KV = yield* Effect.promise(() =>
      kvm.create(bucketName, { history: 1, replicas: nats.replicas }).catch(() => kvm.open(bucketName)),
    )

    // Who is live: the presence heartbeats (Presence.ts) of the other daemons, and this one.
    const heard = new Map<string, number>()
    const presence = nats.connection.subscribe(`${prefix}.presence`, {
      callback: (error, message) => {
        if (error !== null) return
        try {
          const beat = message.json<{ daemonId?: unknown; bye?: unknown }>()
          if (typeof beat.daemonId !== "string" || beat.daemonId === daemonId) return
          if (beat.bye === true) heard.delete(beat.daemonId)
          else heard.set(beat.daemonId, performance.now())
        } catch {
          // Not a heartbeat.
        }
      },
    })
    /** The daemons live now (this one too), but `except`, and any not heard since `heardSince`. */
    const liveDaemons = (except?: string, heardSince = 0): Array<string> => {
      const now = performance.now()
      const live = [daemonId]
      for (const [id, at] of heard) if (now - at < liveWithinMs && at > heardSince && id !== except) live.push(id)
      return live
    }

    const wake = (lease: Lease) => {
      const wakers = [...lease.wakers]
      lease.wakers.clear()
      for (const waker of wakers) waker()
    }
    /** Resolves at the lease's next change, or after `ms`. */
    const changed = (lease: Lease, ms: number) =>
      new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer)
          lease.wakers.delete(done)
          resolve()
        }
        const timer = setTimeout(done, ms)
        lease.wakers.add(done)
      })
    /** Resolves once the lease's holder is no longer `from`; `cancel` stops watching. */
    const holderLeaves = (lease: Lease, from: string) => {
      let check: () => void = () => undefined
      const left = new Promise<void>((resolve) => {
        check = () => (lease.holder !== from ? resolve() : void lease.wakers.add(check))
        lease.wakers.add(check)
      })
      return { left, cancel: () => lease.wakers.delete(check) }
    }

    const holds = (lease: Lease) =>
      lease.holder === daemonId && !lease.releasing && !closing && performance.now() < lease.validUntil

    /** A newer revision of the entry: who holds it now. */
    const observe = (lease: Lease, revision: number, holder: string | undefined) => {
      if (revision <= lease.revision) return
      const wasMine = lease.holder === daemonId
      lease.revision = revision
      lease.holder = holder
      lease.seenAt = performance.now()
      if (holder !== daemonId) lease.validUntil = 0
      else if (!wasMine) lease.heldSince = performance.now()
      wake(lease)
    }

    const holderOf = (value: Uint8Array): string | undefined => {
      try {
        const holder = (JSON.parse(new TextDecoder().decode(value)) as { holder?: unknown }).holder
        return typeof holder === "string" && holder !== "" ? holder : undefined
      } catch {
        return undefined
      }
    }

    const refresh = async (lease: Lease) => {
      const entry = await kv.get(lease.store)
      if (entry === null) return
      observe(lease, entry.revision, entry.operation === "PUT" ? holderOf(entry.value) : undefined)
    }

    /** Compare-and-set of the entry on the revision seen; true when it was stored. */
    const swap = async (lease: Lease, holder: string | undefined): Promise<boolean> => {
      const value = JSON.stringify({ holder: holder ?? "" })
      const sentAt = performance.now()
      try {
        const revision =
          lease.revision === 0
            ? await kv.create(lease.store, value)
            : await kv.update(lease.store, value, lease.revision)
        if (holder === daemonId && lease.holder !== daemonId) lease.heldSince = sentAt
        observe(lease, revision, holder)
        if (holder === daemonId) lease.validUntil = sentAt + leaseMs
        return true
      } catch (error) {
        if (isWrongRevision(error)) await refresh(lease).catch(() => undefined)
        return false
      }
    }

    /** A store here can serve writes: open, not corrupt, not refusing. */
    const servable = (health: StoreHealth | undefined) => health?.state === "running"

    const tick = async (lease: Lease) => {
      const health = local.get(lease.store)?.store.health()
      if (lease.holder === daemonId && lease.validUntil > 0) {
        // Handed over only to a daemon heard since this one took the lease: a daemon that died
        // (whose lease this one took) still looks live for a few heartbeats.
        const preferred = preferredDaemon(lease.store, liveDaemons(undefined, lease.heldSince))
        const handOver = preferred !== daemonId && performance.now() - lease.heldSince > handOverAfterLeases * leaseMs
        if (!servable(health) || handOver || closing) return release(lease)
        await swap(lease, daemonId)
        // Its stream sealed while no compaction runs here: one was cut short (here or at an earlier
        // holder) and writes are stuck until it is finished.
        if (
          holds(lease) &&
          health?.wal?.sealed === true &&
          !lease.compacting &&
          performance.now() - lease.compactionStartedAt >= resumeCompactionEveryMs
        )
          void compactHere(lease).catch(() => undefined)
        return
      }
      await refresh(lease)
      if (closing || !servable(health)) return
      // A restart of this daemon finds its own entry: renewed at once (its earlier run is gone).
      if (lease.holder === daemonId) {
        await swap(lease, daemonId)
        return
      }
      const silentMs = performance.now() - lease.seenAt
      const free = lease.holder === undefined
      if (!free && silentMs < leaseMs + takeoverGraceMs) return
      const preferred = preferredDaemon(lease.store, liveDaemons(lease.holder))
      const anyoneAfterMs = free ? leaseMs : 2 * leaseMs + takeoverGraceMs
      if (preferred !== daemonId && silentMs < anyoneAfterMs) return
      // A holder that died after a compaction moved its store on may have left the sealed stream.
      if (await swap(lease, daemonId)) void retireOldStreams(lease.store).catch(() => undefined)
    }

    /**
     * Deletes the streams of `store`'s earlier generations (StoreGenerations.ts) once every live
     * daemon has switched to the current one, or after `switchWaitMs` (one that switches later, or
     * was away, rebuilds its copy from the current stream). Answers the streams deleted.
     */
    const retireOldStreams = async (store: string): Promise<ReadonlyArray<string>> => {
      const pointer = await currentGeneration(nats, store)
      if (pointer.generation === 0) return []
      const old: Array<string> = []
      for await (const name of nats.manager.streams.names()) {
        const generation = generationOfStream(prefix, store, name)
        if (generation !== undefined && generation < pointer.generation) old.push(name)
      }
      if (old.length === 0) return []
      const deadline = performance.now() + switchWaitMs
      while (performance.now() < deadline && !closing) {
        const behind = await Promise.all(
          liveDaemons(daemonId).map(async (daemon) =>
            (await switchedGeneration(nats, store, daemon).catch(() => -1)) < pointer.generation ? daemon : undefined,
          ),
        )
        if (behind.every((daemon) => daemon === undefined)) break
        await sleep(250)
      }
      const deleted: Array<string> = []
      for (const name of old) {
        const gone = await nats.manager.streams.delete(name).catch((error: unknown) => apiCode(error) === 10059)
        if (gone) deleted.push(name)
      }
      return deleted
    }

    /** Compacts `lease`'s store here (this daemon holds its lease), then retires the sealed stream. */
    const compactHere = async (lease: Lease): Promise<Exit.Exit<CompactionReport, StoreError>> => {
      const entry = local.get(lease.store)
      if (entry === undefined)
        return Exit.fail(new StoreError({ store: lease.store, reason: "Unavailable", message: "not run here" }))
      lease.compacting = true
      lease.compactionStartedAt = performance.now()
      try {
        const exit = await Effect.runPromiseExit(entry.store.compact())
        if (Exit.isSuccess(exit)) await retireOldStreams(lease.store).catch(() => undefined)
        return exit
      } finally {
        lease.compacting = false
      }
    }

    const release = async (lease: Lease) => {
      lease.releasing = true
      try {
        await sleep(releasePauseMs)
        await swap(lease, undefined)
      } finally {
        lease.releasing = false
        lease.validUntil = 0
      }
    }

    const loops: Array<Promise<void>> = []
    const startLoop = (lease: Lease) =>
      loops.push(
        (async () => {
          while (!closing) {
            await tick(lease).catch(() => undefined)
            // A holder renews on its clock; any other daemon looks again as soon as the lease changes.
            await Promise.race([
              stopped,
              lease.holder === daemonId && lease.validUntil > 0 ? sleep(renewMs) : changed(lease, renewMs),
            ])
          }
        })(),
      )
    let stopLoops: () => void = () => undefined
    const stopped = new Promise<void>((resolve) => {
      stopLoops = resolve
    })

    // Every change of any lease, as it happens (the ticks alone would see it up to a third of a lease late).
    const watch = yield* Effect.promise(() => kv.watch())
    void (async () => {
      for await (const entry of watch) {
        const lease = leases.get(entry.key)
        if (lease !== undefined)
          observe(lease, entry.revision, entry.operation === "PUT" ? holderOf(entry.value) : undefined)
      }
    })().catch(() => undefined)

    // Forwarded writes, for the stores whose lease this daemon holds.
    const served = nats.connection.subscribe(`${prefix}.fwd.*.${daemonId}`, {
      callback: (error, message) => {
        if (error === null) void serve(message)
      },
    })
    const answer = (message: Msg, reply: ForwardAnswer) => {
      try {
        message.respond(JSON.stringify(reply))
      } catch {
        // The asker is gone (or the connection): it sends again, or has given up.
      }
    }
    const serve = async (message: Msg) => {
      const store = message.subject.split(".").at(-2) ?? ""
      const lease = leases.get(store)
      const entry = local.get(store)
      if (lease === undefined || entry === undefined || !holds(lease))
        return answer(message, { notWriter: `${daemonId} does not hold the writer lease of store "${store}"` })
      let request: ForwardRequest
      let command: unknown
      try {
        request = message.json<ForwardRequest>()
        if (request.compact === true) {
          lease.served++
          const exit = await compactHere(lease)
          if (Exit.isSuccess(exit)) return answer(message, { compacted: exit.value, position: entry.store.position() })
          const failure = Cause.squash(exit.cause)
          if (failure instanceof StoreError && (failure.reason === "NotWriter" || failure.reason === "ShuttingDown"))
            return answer(message, { notWriter: failure.message })
          return answer(message, {
            error: {
              reason: failure instanceof StoreError ? failure.reason : "WriteFailed",
              message: failure instanceof Error ? failure.message : String(failure),
            },
          })
        }
        command = Schema.decodeUnknownSync(entry.definition.commandSchema)(request.command)
      } catch (error) {
        return answer(message, {
          error: {
            reason: "WriteFailed",
            message: `store "${store}": the writer (${daemonId}) cannot read this forwarded command (do the daemons run the same version of mnemos?): ${error instanceof Error ? error.message : String(error)}`,
          },
        })
      }
      lease.served++
      const exit = await Effect.runPromiseExit(entry.store.send(command, { idempotencyKey: request.key }))
      if (Exit.isSuccess(exit)) return answer(message, { ok: exit.value, position: entry.store.position() })
      const failure = Cause.squash(exit.cause)
      if (failure instanceof StoreError) {
        if (failure.reason === "NotWriter" || failure.reason === "ShuttingDown")
          return answer(message, { notWriter: failure.message })
        return answer(message, { error: { reason: failure.reason, message: failure.message } })
      }
      const failureSchema = entry.definition.failureSchema
      if (failureSchema !== undefined && Cause.hasFails(exit.cause)) {
        try {
          return answer(message, { failure: Schema.encodeUnknownSync(failureSchema)(failure) })
        } catch {
          // Not a domain failure after all: reported below.
        }
      }
      return answer(message, {
        error: { reason: "WriteFailed", message: `store "${store}": the writer failed: ${String(failure)}` },
      })
    }

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        closing = true
        // Others take the leases at once, not after they lapse.
        await Promise.all(
          [...leases.values()]
            .filter((lease) => lease.holder === daemonId && lease.validUntil > 0)
            .map((lease) => swap(lease, undefined).catch(() => false)),
        )
        stopLoops()
        await Promise.all(loops)
        served.unsubscribe()
        presence.unsubscribe()
        watch.stop()
        for (const lease of leases.values()) wake(lease)
      }),
    )

    const leaseOf = (store: string): Lease => {
      let lease = leases.get(store)
      if (lease === undefined) {
        lease = {
          store,
          revision: 0,
          holder: undefined,
          seenAt: performance.now(),
          validUntil: 0,
          heldSince: 0,
          releasing: false,
          wakers: new Set(),
          forwarded: 0,
          served: 0,
          compacting: false,
          compactionStartedAt: Number.NEGATIVE_INFINITY,
        }
        leases.set(store, lease)
        startLoop(lease)
      }
      return lease
    }

    const gate = (store: string) => {
      const lease = leaseOf(store)
      return (): string | undefined =>
        holds(lease)
          ? undefined
          : lease.holder !== undefined && lease.holder !== daemonId
            ? `store "${store}": daemon ${lease.holder} holds its writer lease`
            : `store "${store}": no daemon holds its writer lease at the moment`
    }

    const route = <Command, Event, Reply, Failure>(
      definition: StoreDefinition<Command, Event, Reply, Failure>,
      store: Store<Command, Reply, Failure>,
    ): Store<Command, Reply, Failure> => {
      const lease = leaseOf(definition.name)
      local.set(definition.name, { definition, store })
      const encodeCommand = Schema.encodeSync(definition.commandSchema)
      const decodeFailure =
        definition.failureSchema === undefined ? undefined : Schema.decodeUnknownSync(definition.failureSchema)
      const storeError = (reason: StoreError["reason"], message: string) =>
        new StoreError({ store: definition.name, reason, message })

      type Outcome =
        | { readonly _tag: "Reply"; readonly reply: Reply; readonly position?: number }
        | { readonly _tag: "Failure"; readonly failure: Failure | StoreError }

      const forward = async (command: Command, key: string): Promise<Outcome> => {
        lease.forwarded++
        const deadline = performance.now() + leaseMs + takeoverGraceMs + forwardForMsBeyondLease
        let payload: Uint8Array
        try {
          payload = new TextEncoder().encode(JSON.stringify({ command: encodeCommand(command), key }))
        } catch (error) {
          return { _tag: "Failure", failure: storeError("WriteFailed", `cannot encode the command: ${String(error)}`) }
        }
        const payloadMax = nats.connection.info?.max_payload ?? 1024 * 1024
        if (payload.byteLength > payloadMax)
          return {
            _tag: "Failure",
            failure: storeError(
              "TooLarge",
              `store "${definition.name}": this command takes ${payload.byteLength} bytes, more than one NATS message holds (${payloadMax}); split it into smaller ones`,
            ),
          }
        let lastProblem = "no daemon took the writer lease"
        while (true) {
          const remaining = deadline - performance.now()
          const unreachable = nats.unavailable()
          if (unreachable !== undefined)
            return { _tag: "Failure", failure: storeError("Unavailable", `store "${definition.name}": ${unreachable}`) }
          if (remaining <= 0 || closing)
            return {
              _tag: "Failure",
              failure: storeError(
                "Unavailable",
                `store "${definition.name}": no writer answered for ${Math.round((leaseMs + takeoverGraceMs + forwardForMsBeyondLease) / 1000)} s (${lastProblem}); if it was stored, it was applied once, and a retry with the same idempotency key is answered with its outcome`,
              ),
            }
          if (holds(lease)) {
            // The lease came here meanwhile: decided here, with the key (an earlier forward may be stored).
            const exit = await Effect.runPromiseExit(store.send(command, { idempotencyKey: key }))
            if (Exit.isSuccess(exit)) return { _tag: "Reply", reply: exit.value }
            const failure = Cause.squash(exit.cause)
            if (failure instanceof StoreError && failure.reason === "NotWriter") continue
            if (Cause.hasFails(exit.cause)) return { _tag: "Failure", failure: failure as Failure | StoreError }
            throw failure
          }
          const holder = lease.holder
          if (holder === undefined || holder === daemonId) {
            await changed(lease, Math.min(renewMs, remaining))
            continue
          }
          // A holder that dies or loses the lease while the write is on its way does not answer: the
          // write is sent again to the next holder at once (same key), not after the timeout.
          const leaves = holderLeaves(lease, holder)
          try {
            const request = nats.connection.request(`${prefix}.fwd.${definition.name}.${holder}`, payload, {
              timeout: Math.max(1, Math.min(forwardAttemptMs, remaining)),
            })
            const reply = await Promise.race([request, leaves.left.then(() => undefined)])
            if (reply === undefined) {
              request.catch(() => undefined)
              lastProblem = `${holder} lost the writer lease while the write was on its way`
              continue
            }
            const answered = reply.json<ForwardAnswer>()
            if ("ok" in answered) return { _tag: "Reply", reply: answered.ok as Reply, position: answered.position }
            if ("failure" in answered && decodeFailure !== undefined)
              return { _tag: "Failure", failure: decodeFailure(answered.failure) }
            if ("error" in answered)
              return { _tag: "Failure", failure: storeError(answered.error.reason, answered.error.message) }
            lastProblem =
              "notWriter" in answered ? answered.notWriter : "the writer answered what this daemon cannot read"
            if (lease.holder === holder) await refresh(lease).catch(() => undefined)
            if (lease.holder === holder) await changed(lease, Math.min(renewMs / 3, remaining))
          } catch (error) {
            // No answer (the holder is gone, or slow): sent again, with the same key, to whoever holds it then.
            lastProblem = `${holder}: ${error instanceof Error ? error.message : String(error)}`
            if (lease.holder === holder) await changed(lease, Math.min(renewMs / 3, remaining))
          } finally {
            leaves.cancel()
          }
        }
      }

      const forwarded = (command: Command, key: string | undefined): Effect.Effect<Reply, Failure | StoreError> =>
        Effect.flatMap(
          Effect.promise(() => forward(command, key ?? `mnemos-forward:${runId}:${++keyCounter}`)),
          (outcome) =>
            outcome._tag === "Failure"
              ? Effect.fail(outcome.failure)
              : outcome.position === undefined
                ? Effect.succeed(outcome.reply)
                : Effect.as(store.awaitPosition(outcome.position), outcome.reply),
        )

      /**
       * Compacts the store at its writer (here when this daemon holds the lease), which replaces the
       * store's stream; answers once this daemon has switched to the new one too.
       */
      const compactAtWriter = async (): Promise<Exit.Exit<CompactionReport, StoreError>> => {
        const deadline = performance.now() + compactForwardMs
        let lastProblem = "no daemon took the writer lease"
        while (true) {
          const remaining = deadline - performance.now()
          if (remaining <= 0 || closing)
            return Exit.fail(
              storeError("Unavailable", `store "${definition.name}": no writer compacted it (${lastProblem})`),
            )
          if (holds(lease)) {
            const exit = await compactHere(lease)
            if (Exit.isFailure(exit)) {
              const failure = Cause.squash(exit.cause)
              if (failure instanceof StoreError && failure.reason === "NotWriter") continue
            }
            return exit
          }
          const holder = lease.holder
          if (holder === undefined || holder === daemonId) {
            await changed(lease, Math.min(renewMs, remaining))
            continue
          }
          try {
            const reply = await nats.connection.request(
              `${prefix}.fwd.${definition.name}.${holder}`,
              new TextEncoder().encode(JSON.stringify({ compact: true })),
              { timeout: Math.max(1, remaining) },
            )
            const answered = reply.json<ForwardAnswer>()
            if ("compacted" in answered) {
              const caughtUp = await Effect.runPromiseExit(store.awaitPosition(answered.position))
              return Exit.isSuccess(caughtUp) ? Exit.succeed(answered.compacted) : Exit.failCause(caughtUp.cause)
            }
            if ("error" in answered) return Exit.fail(storeError(answered.error.reason, answered.error.message))
            lastProblem =
              "notWriter" in answered ? answered.notWriter : "the writer answered what this daemon cannot read"
            if (lease.holder === holder) await refresh(lease).catch(() => undefined)
            if (lease.holder === holder) await changed(lease, Math.min(renewMs / 3, remaining))
          } catch (error) {
            lastProblem = `${holder}: ${error instanceof Error ? error.message : String(error)}`
            if (lease.holder === holder) await changed(lease, Math.min(renewMs / 3, remaining))
          }
        }
      }

      return {
        ...store,
        compact: () => Effect.flatMap(Effect.promise(compactAtWriter), (exit) => exit),
        send: (command, options) =>
          Effect.suspend(() =>
            holds(lease)
              ? store.send(command, options).pipe(
                  Effect.catchIf(
                    (error): error is StoreError => error instanceof StoreError && error.reason === "NotWriter",
                    () => forwarded(command, options?.idempotencyKey),
                  ),
                )
              : forwarded(command, options?.idempotencyKey),
          ),
        health: () => ({
          ...store.health(),
          writer: {
            ...(lease.holder !== undefined ? { holder: lease.holder } : {}),
            self: holds(lease),
            forwarded: lease.forwarded,
            served: lease.served,
          },
        }),
      }
    }

    const writers = (): ReadonlyArray<WriterView> =>
      [...leases.values()].map((lease) => ({
        store: lease.store,
        ...(lease.holder !== undefined ? { holder: lease.holder } : {}),
        self: holds(lease),
        forwarded: lease.forwarded,
        served: lease.served,
      }))

    return WriteRouting.of({ gate, route, writers })
  },
)

/** The write routing as a layer (a shared memory's daemon builds it beside its logs). */
export const layer: Layer.Layer<WriteRouting, never, Nats> = Layer.effect(WriteRouting, makeWriterLeases)
