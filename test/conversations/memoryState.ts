/**
 * The conversations store's `decide` and `apply` on a plain in-memory key/value map: the domain
 * without WAL, LMDB or actors, for fast property tests of what the store keeps and of the search
 * index built from it.
 */
import { Result } from "effect"
import {
  type ConversationCommand,
  type ConversationReply,
  conversationStore,
} from "../../src/conversations/ConversationStore.ts"
import type { Entry, KeyRange, StoreWriter } from "../../src/stores/checkpoint/Checkpoint.ts"

/** A sorted in-memory StoreWriter. */
export class MemoryState implements StoreWriter {
  readonly entries = new Map<string, unknown>()
  get = (key: string): unknown => this.entries.get(key)
  put = (key: string, value: unknown): void => {
    this.entries.set(key, value)
  }
  remove = (key: string): void => {
    this.entries.delete(key)
  }
  getRange = (range: KeyRange): Iterable<Entry> => {
    const keys = [...this.entries.keys()].filter((key) => key >= range.start && key < range.end).sort()
    if (range.reverse) keys.reverse()
    return keys.slice(0, range.limit ?? keys.length).map((key) => ({ key, value: this.entries.get(key) }))
  }
  count = (range: KeyRange): number => [...this.getRange(range)].length
}

/** Decides and applies one command at time `now`; returns the reply or the failure. */
export const execute = (
  state: MemoryState,
  command: ConversationCommand,
  now: number,
): Result.Result<ConversationReply, unknown> => {
  const decided = conversationStore.decide(command, state, { now })
  if (Result.isFailure(decided)) return Result.fail(decided.failure)
  for (const event of decided.success.events) conversationStore.apply(event, state)
  return Result.succeed(decided.success.reply)
}
