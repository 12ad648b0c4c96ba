/**
 * A store actor's mailbox: the bounded queue of commands waiting to be served, and the commands
 * the actor holds outside it.
 *
 * Besides the queue it keeps two lists, so that no command is ever dropped and each is answered
 * exactly once:
 * - `inFlight`: the batch (or two pipelined batches) being decided and written. Its callers are
 *   answered when the write's fate is known; if the write fails, only after the log is rolled back.
 * - `requeued`: commands taken from the queue but never written (decided on top of a batch whose
 *   write then failed, or not decided at all). The next incarnation serves them before the queue,
 *   in their original order.
 *
 * Ending the queue (`end`, at shutdown) refuses later offers; senders already waiting for room
 * still get in, which is why `clearWaiting` is called until it finds nothing.
 */
import { type Cause, Deferred, Effect, Queue } from "effect"

/** One command waiting for its reply. */
export interface Envelope<Command, Reply, Failure> {
  readonly command: Command
  readonly idempotencyKey: string | undefined
  readonly reply: Deferred.Deferred<Reply, Failure>
}

/** The queue and the actor's held commands. */
export class Mailbox<Command, Reply, Failure> {
  /** The batch being written; see the module docblock. */
  inFlight: ReadonlyArray<Envelope<Command, Reply, Failure>> = []
  private requeued: ReadonlyArray<Envelope<Command, Reply, Failure>> = []

  private constructor(
    private readonly queue: Queue.Queue<Envelope<Command, Reply, Failure>, Cause.Done>,
    /** Most commands taken at once (`batchCommandsMax`). */
    readonly batchMax: number,
  ) {}

  /** A mailbox holding at most `capacity` commands, served at most `batchMax` at a time. */
  static make = <Command, Reply, Failure>(capacity: number, batchMax: number) =>
    Effect.map(
      Queue.bounded<Envelope<Command, Reply, Failure>, Cause.Done>(capacity),
      (queue) => new Mailbox(queue, batchMax),
    )

  /** Puts `envelope` in the queue if there is room now; false when full or ended. */
  offerUnsafe(envelope: Envelope<Command, Reply, Failure>): boolean {
    return Queue.offerUnsafe(this.queue, envelope)
  }

  /** Puts `envelope` in the queue, waiting for room; false once the mailbox has ended. */
  offer(envelope: Envelope<Command, Reply, Failure>): Effect.Effect<boolean> {
    return Queue.offer(this.queue, envelope)
  }

  /** Commands waiting in the queue (not counting the held ones). */
  size(): number {
    return Queue.sizeUnsafe(this.queue)
  }

  /** The next batch: requeued commands first, else one to `batchMax` from the queue (waiting for one). */
  takeBatch(): Effect.Effect<ReadonlyArray<Envelope<Command, Reply, Failure>>, Cause.Done> {
    if (this.requeued.length > 0) {
      const batch = this.requeued.slice(0, this.batchMax)
      this.requeued = this.requeued.slice(this.batchMax)
      return Effect.succeed(batch)
    }
    return this.takeQueued()
  }

  /** One to `batchMax` commands from the queue, waiting for one; fails with `Done` once it ended. */
  takeQueued(): Effect.Effect<ReadonlyArray<Envelope<Command, Reply, Failure>>, Cause.Done> {
    return Queue.takeBetween(this.queue, 1, this.batchMax)
  }

  /** Hands commands back, to be served before everything else, in this order. */
  requeue(envelopes: ReadonlyArray<Envelope<Command, Reply, Failure>>): void {
    if (envelopes.length > 0) this.requeued = [...envelopes, ...this.requeued]
  }

  /** Every requeued command, removed. */
  takeAllRequeued(): ReadonlyArray<Envelope<Command, Reply, Failure>> {
    const all = this.requeued
    this.requeued = []
    return all
  }

  /** Every command waiting to be served, removed: the requeued ones, then the queue. */
  clearWaiting(): Effect.Effect<Array<Envelope<Command, Reply, Failure>>> {
    return Effect.map(Queue.clear(this.queue), (queued) => [...this.takeAllRequeued(), ...queued])
  }

  /** Refuses offers from now on (senders already waiting for room still get in). */
  end(): Effect.Effect<void> {
    return Effect.asVoid(Queue.end(this.queue))
  }
}

/** Answers every envelope with `error`. */
export const failAll = <Command, Reply, Failure>(
  envelopes: Iterable<Envelope<Command, Reply, Failure>>,
  error: Failure,
): Effect.Effect<void> =>
  Effect.forEach(envelopes, (envelope) => Deferred.fail(envelope.reply, error), { discard: true })
