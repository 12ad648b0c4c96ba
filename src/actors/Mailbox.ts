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
 * Besides commands the queue carries controls: work that needs the store to itself between batches
 * (a compaction). A control is served in its place in the queue: after every command sent before it,
 * before every command sent after it, and never inside a batch.
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

/** Work that needs the store to itself between batches; `reply` is answered like a command's. */
export interface Control {
  readonly _tag: "Control"
  readonly name: string
  /** For a "catch-up" control: the shared log's position to receive and apply through. */
  readonly position?: number
  // biome-ignore lint/suspicious/noExplicitAny: each control answers with its own types; the mailbox only carries it
  readonly reply: Deferred.Deferred<any, any>
}

/** What the queue holds. */
export type Item<Command, Reply, Failure> = Envelope<Command, Reply, Failure> | Control

/** True for a control (as opposed to a command). */
export const isControl = <Command, Reply, Failure>(item: Item<Command, Reply, Failure>): item is Control =>
  "_tag" in item && item._tag === "Control"

/** The next thing to serve: a batch of commands, or one control. */
export type Next<Command, Reply, Failure> =
  | { readonly _tag: "Commands"; readonly commands: ReadonlyArray<Envelope<Command, Reply, Failure>> }
  | { readonly _tag: "Control"; readonly control: Control }

/** The queue and the actor's held commands. */
export class Mailbox<Command, Reply, Failure> {
  /** The batch being written; see the module docblock. */
  inFlight: ReadonlyArray<Envelope<Command, Reply, Failure>> = []
  private requeued: ReadonlyArray<Item<Command, Reply, Failure>> = []

  private constructor(
    private readonly queue: Queue.Queue<Item<Command, Reply, Failure>, Cause.Done>,
    /** Most commands taken at once (`batchCommandsMax`). */
    readonly batchMax: number,
  ) {}

  /** A mailbox holding at most `capacity` commands, served at most `batchMax` at a time. */
  static make = <Command, Reply, Failure>(capacity: number, batchMax: number) =>
    Effect.map(
      Queue.bounded<Item<Command, Reply, Failure>, Cause.Done>(capacity),
      (queue) => new Mailbox(queue, batchMax),
    )

  /** Puts `item` in the queue if there is room now; false when full or ended. */
  offerUnsafe(item: Item<Command, Reply, Failure>): boolean {
    return Queue.offerUnsafe(this.queue, item)
  }

  /** Puts `item` in the queue, waiting for room; false once the mailbox has ended. */
  offer(item: Item<Command, Reply, Failure>): Effect.Effect<boolean> {
    return Queue.offer(this.queue, item)
  }

  /** Commands waiting in the queue (not counting the held ones). */
  size(): number {
    return Queue.sizeUnsafe(this.queue)
  }

  /**
   * The next thing to serve, waiting for one: a control, or commands up to `batchMax` — requeued
   * ones first, never past a control (what follows it waits for it).
   */
  takeNext(): Effect.Effect<Next<Command, Reply, Failure>, Cause.Done> {
    if (this.requeued.length > 0) {
      const [head, ...rest] = this.requeued
      if (isControl(head!)) {
        this.requeued = rest
        return Effect.succeed({ _tag: "Control", control: head })
      }
      return Effect.succeed({
        _tag: "Commands",
        commands: this.cutAtControl(this.requeued, (left) => (this.requeued = left)),
      })
    }
    return Effect.map(Queue.takeBetween(this.queue, 1, this.batchMax), (taken) => {
      const head = taken[0]!
      if (isControl(head)) {
        this.requeued = taken.slice(1)
        return { _tag: "Control", control: head } as const
      }
      return { _tag: "Commands", commands: this.cutAtControl(taken, (left) => this.requeue(left)) } as const
    })
  }

  /**
   * Commands that arrived meanwhile, to follow a batch being written: up to `batchMax` from the queue,
   * none while anything is held (it goes first) and none past a control. May be empty.
   */
  takeFollowers(): Effect.Effect<ReadonlyArray<Envelope<Command, Reply, Failure>>, Cause.Done> {
    if (this.requeued.length > 0 || this.size() === 0) return Effect.succeed([])
    return Effect.map(Queue.takeBetween(this.queue, 1, this.batchMax), (taken) =>
      this.cutAtControl(taken, (left) => this.requeue(left)),
    )
  }

  /** The commands of `items` before the first control (at most `batchMax`); `keep` gets the rest. */
  private cutAtControl(
    items: ReadonlyArray<Item<Command, Reply, Failure>>,
    keep: (rest: ReadonlyArray<Item<Command, Reply, Failure>>) => void,
  ): ReadonlyArray<Envelope<Command, Reply, Failure>> {
    let end = 0
    while (end < items.length && end < this.batchMax && !isControl(items[end]!)) end++
    keep(items.slice(end))
    return items.slice(0, end) as ReadonlyArray<Envelope<Command, Reply, Failure>>
  }

  /** Hands items back, to be served before everything else, in this order. */
  requeue(items: ReadonlyArray<Item<Command, Reply, Failure>>): void {
    if (items.length > 0) this.requeued = [...items, ...this.requeued]
  }

  /** Every requeued item, removed. */
  takeAllRequeued(): ReadonlyArray<Item<Command, Reply, Failure>> {
    const all = this.requeued
    this.requeued = []
    return all
  }

  /** Every item waiting to be served, removed: the requeued ones, then the queue. */
  clearWaiting(): Effect.Effect<Array<Item<Command, Reply, Failure>>> {
    return Effect.map(Queue.clear(this.queue), (queued) => [...this.takeAllRequeued(), ...queued])
  }

  /** Refuses offers from now on (senders already waiting for room still get in). */
  end(): Effect.Effect<void> {
    return Effect.asVoid(Queue.end(this.queue))
  }
}

/** Answers every item (command or control) with `error`. */
export const failAll = <Failure>(
  // biome-ignore lint/suspicious/noExplicitAny: commands and controls succeed with different types; failing ignores them
  items: Iterable<{ readonly reply: Deferred.Deferred<any, Failure> }>,
  error: Failure,
): Effect.Effect<void> => Effect.forEach(items, (item) => Deferred.fail(item.reply, error), { discard: true })
