/**
 * A small graph opens framed and readable: the graph view fits the whole graph into the canvas
 * when it loads (not squeezed into a corner while the layout spreads it), and names every node while
 * there are few of them. Checked on a 12-entity graph in a real Chromium.
 */
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { callTool, cleanup, connectClient, type DaemonProcess, startDaemon, tempDir } from "../transports/harness.ts"
import { buildDashboard, launchChromium, screenshot } from "./browser.ts"
import { decodePng, type Pixels } from "./png.ts"

// The browser global the function run in the page uses (this file is type-checked for Node).
declare const getComputedStyle: (element: unknown) => { readonly backgroundColor: string }

let daemon: DaemonProcess
let browser: Browser
let page: Page

const names = [
  "auth-service",
  "billing-service",
  "checkout-api",
  "ledger",
  "notifications",
  "orders-db",
  "payments-gateway",
  "rate-limiter",
  "search-index",
  "session-store",
  "shipping",
  "user-profile",
]

/** The bounding box of the pixels within `tolerance` of the colour `#rrggbb` (the nodes' colour). */
const boxOf = (pixels: Pixels, hex: string, tolerance = 24) => {
  const rgb = [1, 3, 5].map((start) => Number.parseInt(hex.slice(start, start + 2), 16))
  let [left, top, right, bottom] = [pixels.width, pixels.height, -1, -1]
  for (let y = 0; y < pixels.height; y++)
    for (let x = 0; x < pixels.width; x++) {
      const offset = (y * pixels.width + x) * 4
      if (rgb.some((channel, index) => Math.abs(pixels.rgba[offset + index]! - channel) > tolerance)) continue
      left = Math.min(left, x)
      right = Math.max(right, x)
      top = Math.min(top, y)
      bottom = Math.max(bottom, y)
    }
  return { left, top, right, bottom }
}

beforeAll(async () => {
  const assetsDir = tempDir("mnemos-framing-assets-")
  await buildDashboard(assetsDir)
  daemon = await startDaemon({ env: { MNEMOS_DASHBOARD_DIR: assetsDir } })
  const client = await connectClient("streamable-http", daemon.url)
  const created = await callTool(client, "create_entities", {
    entities: names.map((name) => ({ name, entityType: "service", observations: [`${name} runs in production`] })),
  })
  if (created.isError) throw new Error(created.text)
  // Half of them related (a chain), half alone: what a young memory looks like.
  const relations = names.slice(1, 6).map((name, index) => ({ from: names[index]!, to: name, relationType: "calls" }))
  const related = await callTool(client, "create_relations", { relations })
  if (related.isError) throw new Error(related.text)
  browser = await launchChromium()
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: "dark" })
  page = await context.newPage()
}, 180_000)

afterAll(async () => {
  await browser?.close()
  await cleanup()
}, 60_000)

describe("the graph view of a small graph", () => {
  it("frames the whole graph on load and names every node", async () => {
    const link = [...daemon.output().matchAll(/dashboard:\s+(http\S+\?token=\S+)/g)].at(-1)?.[1]
    await page.goto(link!)
    await page.getByText("12 entities").waitFor()
    await page.getByText("5 relations").waitFor()
    await page.getByRole("button", { name: "Run layout" }).waitFor({ timeout: 60_000 })
    await page.waitForTimeout(800) // the camera's framing animation
    const nodeColor = await page
      .locator(".legend-item", { hasText: "service" })
      .locator(".dot")
      .evaluate((dot) => {
        const [r, g, b] = getComputedStyle(dot).backgroundColor.match(/\d+/g)!.map(Number)
        return `#${[r, g, b].map((channel) => channel!.toString(16).padStart(2, "0")).join("")}`
      })
    const canvas = page.getByTestId("graph-canvas")
    const shot = decodePng(await canvas.screenshot({ mask: [page.locator(".legend")], maskColor: "#000000" }))
    await screenshot(page, "graph-small")
    const box = boxOf(shot, nodeColor)
    const [width, height] = [box.right - box.left, box.bottom - box.top]
    // The drawing spans most of the canvas both ways, and sits around its middle.
    expect(width / shot.width, JSON.stringify({ box, shot: [shot.width, shot.height] })).toBeGreaterThan(0.5)
    expect(height / shot.height, JSON.stringify({ box, shot: [shot.width, shot.height] })).toBeGreaterThan(0.5)
    const middle = { x: (box.left + box.right) / 2 / shot.width, y: (box.top + box.bottom) / 2 / shot.height }
    expect(Math.abs(middle.x - 0.5)).toBeLessThan(0.15)
    expect(Math.abs(middle.y - 0.5)).toBeLessThan(0.15)
    // Every node's name is drawn.
    const labels = await page.getByTestId("graph-canvas").getAttribute("data-labels")
    expect(Number(labels)).toBe(names.length)
  }, 120_000)
})
