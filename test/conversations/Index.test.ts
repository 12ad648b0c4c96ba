/**
 * The search index against references, over random histories of writes, updates, deletes and
 * rebuilds applied by the store's own decide/apply: after any history, the incrementally kept
 * index (with compactions forced early) answers exactly like an index rebuilt from scratch, its
 * hits are exactly the live messages that share a term with the query and pass the filters, and
 * they are ranked by score, importance, time and id. The store's session bookkeeping (links,
 * counts, first/last) is checked against the live messages too.
 */
import { Result } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { ConversationIndex, type IndexQuery } from "../../src/conversations/ConversationIndex.ts"
import {
  allHistory,
  parseHistoryKey,
  type SessionRecord,
  sessionKey,
} from "../../src/conversations/ConversationKeys.ts"
import { liveMessage, neighbours } from "../../src/conversations/ConversationReads.ts"
import { defaultMetadata, type MemoryKind, type MemoryTier, type Message } from "../../src/conversations/Model.ts"
import { distinctTermsOf } from "../../src/conversations/Terms.ts"
import { execute, MemoryState } from "./memoryState.ts"

const words = ["alpha", "beta", "gamma", "delta", "データ", "ベース", "設計", "Café", "ÉCOLE", "x1"]
const sentence = fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 6 }).map((parts) => parts.join(" "))
const kinds: Array<MemoryKind> = ["conversation", "semantic", "summary"]
const tiers: Array<MemoryTier> = ["short", "mid", "long"]

const operation = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant("write" as const),
      project: fc.constantFrom("p1", "p2"),
      session: fc.constantFrom("s1", "s2", "s3"),
      content: sentence,
      summary: fc.option(sentence, { nil: undefined }),
      tags: fc.uniqueArray(fc.constantFrom("alpha", "red", "blue"), { maxLength: 2 }),
      kind: fc.constantFrom(...kinds),
      tier: fc.constantFrom(...tiers),
      importance: fc.integer({ min: 0, max: 100 }),
      tick: fc.integer({ min: 0, max: 2 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant("update" as const),
      target: fc.nat(),
      content: sentence,
      kind: fc.constantFrom(...kinds),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("delete" as const), target: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("purge" as const) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("search" as const) }) },
)
const query = fc.record({
  project: fc.constantFrom("p1", "p2"),
  query: fc.array(fc.constantFrom(...words, "missing"), { minLength: 1, maxLength: 3 }).map((parts) => parts.join(" ")),
  sessionId: fc.option(fc.constantFrom("s1", "s2"), { nil: undefined }),
  kinds: fc.option(fc.uniqueArray(fc.constantFrom(...kinds), { minLength: 1 }), { nil: undefined }),
  tiers: fc.option(fc.uniqueArray(fc.constantFrom(...tiers), { minLength: 1 }), { nil: undefined }),
  tags: fc.option(fc.uniqueArray(fc.constantFrom("alpha", "red", "blue"), { minLength: 1, maxLength: 2 }), {
    nil: undefined,
  }),
  minImportance: fc.integer({ min: 0, max: 100 }),
  limit: fc.constant(1000),
})

/** Every live message, by project. */
const liveMessages = (state: MemoryState): Array<{ project: string; message: Message }> =>
  [...state.getRange(allHistory(1))].map(({ key }) => {
    const { project, id } = parseHistoryKey(1, key)
    return { project, message: liveMessage(state, project, id)! }
  })

const matches = (entry: { project: string; message: Message }, request: IndexQuery): boolean => {
  const { message } = entry
  const queryTerms = new Set(distinctTermsOf(request.query))
  const texts = [message.content, message.metadata.summary ?? "", ...message.metadata.tags]
  const shares = texts.some((text) => distinctTermsOf(text).some((term) => queryTerms.has(term)))
  return (
    shares &&
    entry.project === request.project &&
    (request.sessionId === undefined || message.session_id === request.sessionId) &&
    (request.kinds === undefined || request.kinds.includes(message.metadata.memory_kind)) &&
    (request.tiers === undefined || request.tiers.includes(message.metadata.memory_tier)) &&
    (request.tags === undefined || request.tags.every((tag) => message.metadata.tags.includes(tag))) &&
    message.metadata.importance >= request.minImportance
  )
}

describe("search index", () => {
  it("property: incremental = rebuilt = reference, over random histories", () => {
    let compactions = 0
    let slicedSteps = 0
    fc.assert(
      fc.property(
        fc.array(operation, { minLength: 1, maxLength: 60 }),
        fc.array(query, { minLength: 1, maxLength: 4 }),
        (operations, queries) => {
          const state = new MemoryState()
          const incremental = new ConversationIndex(0)
          // Rebuilt one message a step (`rebuildStep` with no time), a step after each operation:
          // its rebuilds run through writes, updates, deletes and purges.
          const sliced = new ConversationIndex(0)
          const ids: Array<{ project: string; id: string }> = []
          let now = 1_000
          const check = () => {
            incremental.sync(state)
            while (!sliced.rebuildStep(state, 0)) slicedSteps++
            sliced.sync(state)
            const rebuilt = new ConversationIndex(0)
            rebuilt.rebuild(state)
            const live = liveMessages(state)
            for (const request of queries) {
              const hits = incremental.search(request)
              expect(hits).toEqual(rebuilt.search(request))
              expect(sliced.search(request)).toEqual(hits)
              const expected = live.filter((entry) => matches(entry, request)).map((entry) => entry.message.message_id)
              expect(hits.map((hit) => hit.id).sort()).toEqual(expected.sort())
              const byId = new Map(live.map((entry) => [entry.message.message_id, entry.message]))
              for (let index = 1; index < hits.length; index++) {
                const [a, b] = [hits[index - 1]!, hits[index]!]
                const [ma, mb] = [byId.get(a.id)!, byId.get(b.id)!]
                const rank = (hit: typeof a, message: Message) => [
                  hit.score,
                  message.metadata.importance,
                  message.timestamp,
                ]
                const [ra, rb] = [rank(a, ma), rank(b, mb)]
                const order = ra.findIndex((value, position) => value !== rb[position])
                if (order >= 0) expect(ra[order]!).toBeGreaterThan(rb[order]!)
                else expect(a.id > b.id).toBe(true)
                expect(a.score).toBeCloseTo(a.breakdown.content + a.breakdown.summary + a.breakdown.tags, 3)
              }
            }
          }
          for (const step of operations) {
            now += 1
            if (!sliced.rebuildStep(state, 0)) slicedSteps++
            if (step.op === "write") {
              now += step.tick
              const reply = execute(
                state,
                {
                  _tag: "Write",
                  project: step.project,
                  created_by: "test",
                  session_id: step.session,
                  role: "user",
                  content: step.content,
                  metadata: {
                    ...defaultMetadata,
                    tags: step.tags,
                    memory_kind: step.kind,
                    memory_tier: step.tier,
                    importance: step.importance,
                    ...(step.summary !== undefined ? { summary: step.summary } : {}),
                  },
                },
                now,
              )
              if (Result.isSuccess(reply))
                ids.push({ project: step.project, id: (reply.success as { message: Message }).message.message_id })
            } else if (step.op === "update" && ids.length > 0) {
              const { project, id } = ids[step.target % ids.length]!
              execute(
                state,
                {
                  _tag: "Update",
                  project,
                  message_id: id,
                  content: step.content,
                  metadata: { memory_kind: step.kind },
                },
                now,
              )
            } else if (step.op === "delete" && ids.length > 0) {
              const { project, id } = ids[step.target % ids.length]!
              execute(state, { _tag: "Delete", project, message_id: id }, now)
            } else if (step.op === "purge") {
              execute(state, { _tag: "PurgeTombstones" }, now)
              sliced.startRebuild()
            } else if (step.op === "search") {
              check()
            }
          }
          check()
          compactions += incremental.stats().compactions
        },
      ),
      { numRuns: 150 },
    )
    // The runs did exercise the compaction of dead postings, and rebuilds left between operations.
    expect(compactions).toBeGreaterThan(0)
    expect(slicedSteps).toBeGreaterThan(0)
  })

  it("property: sessions link their live messages in id order, with exact counts and ends", () => {
    fc.assert(
      fc.property(fc.array(operation, { minLength: 1, maxLength: 60 }), (operations) => {
        const state = new MemoryState()
        const ids: Array<{ project: string; id: string }> = []
        let now = 1_000
        for (const step of operations) {
          now += 1
          if (step.op === "write") {
            const reply = execute(
              state,
              {
                _tag: "Write",
                project: step.project,
                created_by: "test",
                session_id: step.session,
                role: "user",
                content: step.content,
                metadata: { ...defaultMetadata, memory_kind: step.kind },
              },
              now + step.tick,
            )
            if (Result.isSuccess(reply))
              ids.push({ project: step.project, id: (reply.success as { message: Message }).message.message_id })
          } else if (step.op === "update" && ids.length > 0) {
            const { project, id } = ids[step.target % ids.length]!
            execute(state, { _tag: "Update", project, message_id: id, metadata: { memory_kind: step.kind } }, now)
          } else if (step.op === "delete" && ids.length > 0) {
            const { project, id } = ids[step.target % ids.length]!
            execute(state, { _tag: "Delete", project, message_id: id }, now)
          } else if (step.op === "purge") execute(state, { _tag: "PurgeTombstones" }, now)
        }
        const live = liveMessages(state)
        for (const project of ["p1", "p2"])
          for (const session of ["s1", "s2", "s3"]) {
            const messages = live
              .filter((entry) => entry.project === project && entry.message.session_id === session)
              .map((entry) => entry.message)
            const record = state.get(sessionKey(1, project, session)) as SessionRecord | undefined
            if (messages.length === 0) {
              expect(record).toBeUndefined()
              continue
            }
            expect(record).toMatchObject({
              message_count: messages.length,
              first_id: messages[0]!.message_id,
              started_at: messages[0]!.timestamp,
              last_id: messages.at(-1)!.message_id,
              last_message_at: messages.at(-1)!.timestamp,
            })
            for (const kind of kinds)
              expect(record!.kind_counts[kind]).toBe(
                messages.filter((message) => message.metadata.memory_kind === kind).length,
              )
            messages.forEach((message, index) => {
              const near = neighbours(state, project, message, 2)
              expect(near.before).toEqual(messages.slice(Math.max(0, index - 2), index))
              expect(near.after).toEqual(messages.slice(index + 1, index + 3))
            })
          }
      }),
      { numRuns: 150 },
    )
  })
})
