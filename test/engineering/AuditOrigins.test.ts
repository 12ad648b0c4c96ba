/**
 * The audit store in a shared memory (src/engineering/AuditStore.ts): each daemon audits the events
 * it decided, so one store's sequence numbers arrive from several daemons in no fixed order
 * between them; gaps are found in each daemon's own numbering. Checked on the store's `decide` and
 * `apply` over a plain in-memory state, against a model: an entry is a gap exactly when a daemon's
 * number jumps past the last one audited from it, whatever the interleaving.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import { type AuditEntryInput, allEntries, auditStore } from "../../src/engineering/AuditStore.ts"
import type { StoreView } from "../../src/stores/checkpoint/Checkpoint.ts"
import { Overlay } from "../../src/stores/checkpoint/Overlay.ts"

const emptyView: StoreView = { get: () => undefined, getRange: () => [], count: () => 0 }

/** Runs append commands through decide and apply, as the store would; answers every entry. */
const ledger = () => {
  const state = new Overlay(emptyView)
  return {
    append: (entries: ReadonlyArray<AuditEntryInput>) => {
      const decided = auditStore.decide({ _tag: "Append", entries }, state, { now: 1 })
      assert.isTrue(Result.isSuccess(decided))
      if (Result.isSuccess(decided)) for (const event of decided.success.events) auditStore.apply(event, state)
    },
    entries: () => [...state.getRange(allEntries)].map(({ value }) => value as AuditEntryInput & { seq: number }),
  }
}

const entry = (store: string, sourceSeq: number, origin: string, originSeq: number): AuditEntryInput => ({
  store,
  sourceSeq,
  at: 1,
  project: "p",
  who: "agent",
  tool: "create_entities",
  action: "create",
  summary: `event ${sourceSeq}`,
  origin,
  originSeq,
})

describe("audit entries from several daemons", () => {
  it("a store's events decided by two daemons in turn, audited out of order between them: no gap", () => {
    const audit = ledger()
    // a decided store events 1-3 (its 1-3), b then 4-5 (its 1-2), a again 6 (its 4); b audits first.
    audit.append([entry("graph", 4, "b", 1), entry("graph", 5, "b", 2)])
    audit.append([entry("graph", 1, "a", 1), entry("graph", 2, "a", 2), entry("graph", 3, "a", 3)])
    audit.append([entry("graph", 6, "a", 4)])
    const entries = audit.entries()
    assert.strictEqual(entries.length, 6)
    assert.isFalse(entries.some((audited) => audited.action === "gap"))
  })

  it("a daemon's events it never audited: one gap entry naming the daemon and its numbers", () => {
    const audit = ledger()
    audit.append([entry("graph", 1, "a", 1), entry("graph", 2, "b", 1)])
    audit.append([entry("graph", 9, "a", 5)])
    const gaps = audit.entries().filter((audited) => audited.action === "gap")
    assert.strictEqual(gaps.length, 1)
    assert.include(gaps[0]!.summary, "decided by daemon a (its events 2..4)")
    assert.strictEqual(gaps[0]!.origin, "a")
  })

  it("any interleaving of the daemons' appends, with repeats and drops: a gap exactly where a daemon's numbering jumps", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom("a", "b", "c"), fc.boolean(), fc.boolean()), { minLength: 1, maxLength: 60 }),
        fc.array(fc.nat(), { maxLength: 60 }),
        (events, order) => {
          // The store's events in order: who decided each, whether its audit was dropped, repeated.
          const counts = new Map<string, number>()
          const perOrigin = new Map<string, Array<{ input: AuditEntryInput; dropped: boolean; repeated: boolean }>>()
          events.forEach(([origin, dropped, repeated], index) => {
            const originSeq = (counts.get(origin) ?? 0) + 1
            counts.set(origin, originSeq)
            const list = perOrigin.get(origin) ?? []
            list.push({ input: entry("graph", index + 1, origin, originSeq), dropped, repeated })
            perOrigin.set(origin, list)
          })
          // Each daemon appends its own entries in its order; the daemons interleave as `order` says.
          const queues = [...perOrigin.values()].map((list) =>
            list.flatMap(({ input, dropped, repeated }) => (dropped ? [] : repeated ? [input, input] : [input])),
          )
          const audit = ledger()
          let turn = 0
          while (queues.some((queue) => queue.length > 0)) {
            const open = queues.filter((queue) => queue.length > 0)
            const queue = open[(order[turn++ % Math.max(1, order.length)] ?? 0) % open.length]!
            audit.append([queue.shift()!])
          }
          // The model: per daemon, a gap before each kept entry that follows dropped ones.
          let expectedGaps = 0
          let expectedEntries = 0
          for (const list of perOrigin.values()) {
            let last: number | undefined
            for (const { input, dropped } of list) {
              if (dropped) continue
              if (last !== undefined && input.originSeq! > last + 1) expectedGaps++
              last = input.originSeq!
              expectedEntries++
            }
          }
          const entries = audit.entries()
          assert.strictEqual(entries.filter((audited) => audited.action === "gap").length, expectedGaps)
          assert.strictEqual(entries.filter((audited) => audited.action !== "gap").length, expectedEntries)
        },
      ),
      { numRuns: 300 },
    )
  })
})
