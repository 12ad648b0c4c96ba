/**
 * The dashboard's live feed over real WebSockets on loopback: every page sees every event
 * committed after it arrived, once and in order, whenever it arrived. Pages that arrive together
 * get the same serialised message (DashboardEvents.ts serialises each distinct queue once), so a
 * page that arrives between two batches is the case that must not get another page's queue.
 */
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect } from "effect"
import { assert, describe, it } from "vitest"
import { WebSocket } from "ws"
import type { LiveEvent } from "../../src/dashboard/LiveEvent.ts"
import * as EventBus from "../../src/stores/EventBus.ts"
import { liveFlushIntervalMs, makeDashboardEvents } from "../../src/transports/DashboardEvents.ts"

interface Page {
  readonly seen: Array<number>
  readonly close: () => void
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("the dashboard's live feed", () => {
  it("every page sees exactly the events committed after it arrived, in order, however pages interleave", async () => {
    const program = Effect.gen(function* () {
      const events = yield* makeDashboardEvents
      const bus = yield* EventBus.EventBus
      const server = createServer()
      server.on("upgrade", (request, socket, head) =>
        events.webSocketServer.handleUpgrade(request, socket, head, (webSocket) => events.attach(webSocket)),
      )
      yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
      yield* Effect.addFinalizer(() => Effect.sync(() => server.close()))
      const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/events`

      const open = () =>
        new Promise<Page>((resolve, reject) => {
          const socket = new WebSocket(url)
          const seen: Array<number> = []
          socket.on("message", (data) => {
            const message = JSON.parse(String(data)) as { type: string; events?: ReadonlyArray<LiveEvent> }
            if (message.type === "hello") resolve({ seen, close: () => socket.close() })
            for (const event of message.events ?? []) seen.push(event.seq)
          })
          socket.on("error", reject)
        })
      let seq = 0
      const publish = (count: number) =>
        bus.publishAll(
          Array.from({ length: count }, () => ({
            store: "graph",
            seq: ++seq,
            at: Date.now(),
            event: { _tag: "EntitiesDeleted", project: "default", names: [`entity-${seq}`] },
          })),
        )

      const pages: Array<{ page: Page; from: number }> = []
      const arrive = Effect.promise(async () => pages.push({ page: await open(), from: seq + 1 }))
      yield* arrive
      yield* arrive
      // Batches and arrivals interleaved, within one flush interval and across several.
      for (let round = 0; round < 6; round++) {
        yield* publish(1 + round)
        if (round % 2 === 0) yield* arrive
        yield* publish(3)
        if (round === 3) yield* Effect.promise(() => sleep(2 * liveFlushIntervalMs))
      }
      const last = seq
      yield* Effect.promise(async () => {
        for (let waited = 0; waited < 5_000; waited += 20) {
          if (pages.every(({ page }) => page.seen.at(-1) === last)) return
          await sleep(20)
        }
      })
      for (const { page } of pages) page.close()
      return { pages, last }
    })
    const { pages, last } = await Effect.runPromise(
      Effect.scoped(program).pipe(Effect.provide(EventBus.layer)) as Effect.Effect<{
        pages: Array<{ page: Page; from: number }>
        last: number
      }>,
    )
    assert.strictEqual(pages.length, 5)
    for (const [index, { page, from }] of pages.entries())
      assert.deepStrictEqual(
        page.seen,
        Array.from({ length: last - from + 1 }, (_, offset) => from + offset),
        `page ${index}, arrived before event ${from}`,
      )
  })
})
