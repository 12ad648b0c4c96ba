/**
 * Rendezvous hashing of a store's writer lease (src/cluster/WriterLeases.ts): every store has one
 * preferred daemon among any non-empty set of live daemons, every daemon agrees on it whatever order
 * it lists them in, removing a daemon moves only the stores it was preferred for, and the stores
 * spread over the daemons.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { preferredDaemon } from "../../src/cluster/WriterLeases.ts"

const daemonId = fc.stringMatching(/^[A-Za-z0-9-]{1,24}$/)
const storeName = fc.stringMatching(/^[a-z0-9-]{1,20}$/)

describe("the preferred daemon of a store", () => {
  it("is one of the live daemons, the same in any order, and moves only when its own daemon leaves", () => {
    fc.assert(
      fc.property(
        storeName,
        fc.uniqueArray(daemonId, { minLength: 1, maxLength: 8 }),
        fc.nat(),
        (store, daemons, leaving) => {
          const preferred = preferredDaemon(store, daemons)
          assert.include(daemons, preferred)
          assert.strictEqual(preferredDaemon(store, [...daemons].reverse()), preferred)
          const gone = daemons[leaving % daemons.length]!
          const rest = daemons.filter((daemon) => daemon !== gone)
          if (rest.length > 0 && gone !== preferred) assert.strictEqual(preferredDaemon(store, rest), preferred)
        },
      ),
      { numRuns: 2000 },
    )
  })

  it("spreads stores evenly over three daemons", () => {
    const daemons = ["host-a-1f2e3d", "host-b-4c5b6a", "host-c-7d8e9f"]
    const counts = new Map<string, number>()
    for (let index = 0; index < 3000; index++) {
      const preferred = preferredDaemon(`store-${index}`, daemons)!
      counts.set(preferred, (counts.get(preferred) ?? 0) + 1)
    }
    // 3,000 draws: each daemon gets 1,000 ± a few standard deviations (~26).
    for (const daemon of daemons) assert.approximately(counts.get(daemon) ?? 0, 1000, 150)
  })
})
