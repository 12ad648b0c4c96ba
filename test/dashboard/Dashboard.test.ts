/**
 * The dashboard in a real browser (Debian's Chromium, driven by playwright-core, WebGL on
 * SwiftShader) against a real daemon started from source on a store seeded through MCP:
 *
 * - the API refuses without the login; the one-time link logs in once and becomes a cookie;
 * - the graph is drawn (pixels of the entity colours on the WebGL canvas), search focuses an
 *   entity and its details open;
 * - a task created through MCP appears on the board live, without a reload; dragged
 *   to Done (and another moved by keyboard) it reads back through MCP in its new column;
 * - search shows ranked hits with score breakdowns; activity, notes, conversations, gates and
 *   stats render and follow writes live;
 * - stopping the daemon shows the unreachable state; restarting it reconnects without a new
 *   login;
 * - a 10k-entity graph loads and stays responsive;
 * - and no console errors, except the network errors of the deliberate outage.
 *
 * Screenshots land in test-results/dashboard/ (see browser.ts).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import WebSocket from "ws"
import { readToken } from "../../src/transports/Daemon.ts"
import {
  callTool,
  cleanup,
  clientTransport,
  connectClient,
  type DaemonProcess,
  getJson,
  runCli,
  startDaemon,
  tempDir,
  waitFor,
} from "../transports/harness.ts"
import { buildDashboard, launchChromium, type PageProblems, screenshot, watchProblems } from "./browser.ts"
import { decodePng, pixelsNear } from "./png.ts"
import { type SeededGraph, seedEverythingElse, seedGraph } from "./seed.ts"

// The few browser globals the functions run in the page use (this file is type-checked for Node).
declare const document: {
  readonly activeElement: { readonly id?: string; readonly blur?: () => void } | null
  readonly documentElement: { readonly dataset: Record<string, string | undefined> }
}
declare const window: Record<string, unknown>
declare const getComputedStyle: (element: unknown) => { readonly backgroundColor: string }
declare const requestAnimationFrame: (callback: (now: number) => void) => number

/**
 * A write shows on an open page live: pushed over /events, without a reload (the page marks
 * itself and the mark must survive). How soon is logged, not asserted (alone about 0.2 s; the
 * machines are shared): speed is the benchmarks' job.
 */
const liveShownWithinMs = 10_000

let assetsDir: string
let daemon: DaemonProcess
let client: Client
let browser: Browser
let context: BrowserContext
let page: Page
let problems: PageProblems
let seeded: SeededGraph
const outages: Array<{ from: number; to: number }> = []

const loginUrl = (process: DaemonProcess): string => {
  const matches = [...process.output().matchAll(/dashboard:\s+(http\S+\?token=\S+)/g)]
  const url = matches.at(-1)?.[1]
  if (url === undefined) throw new Error(`the daemon printed no dashboard link:\n${process.output()}`)
  return url
}

/** Presses a shortcut key the way a person would: not while typing in a field. */
const shortcut = async (key: string) => {
  await page.evaluate(() => document.activeElement?.blur?.())
  await page.keyboard.press(key)
}

const tool = async (name: string, args: Record<string, unknown>) => {
  const result = await callTool(client, name, args)
  if (result.isError) throw new Error(`${name}: ${result.text}`)
  return result.structured ?? {}
}

/** The colour the graph's legend shows for an entity type, as #rrggbb. */
const typeColor = (type: string): Promise<string> =>
  page
    .locator(".legend-item", { hasText: type })
    .first()
    .locator(".dot")
    .evaluate((dot) => {
      const [r, g, b] = getComputedStyle(dot).backgroundColor.match(/\d+/g)!.map(Number)
      return `#${[r, g, b].map((channel) => channel!.toString(16).padStart(2, "0")).join("")}`
    })

/** Milliseconds until `text` is visible on the page. */
const timeUntilVisible = async (text: string, since: number): Promise<number> => {
  await page.getByText(text, { exact: false }).first().waitFor({ state: "visible", timeout: liveShownWithinMs })
  return Date.now() - since
}

const upgradeStatus = (url: string, headers: Record<string, string> = {}): Promise<number> =>
  new Promise((resolve) => {
    const socket = new WebSocket(`${url.replace(/^http/, "ws")}/events`, { headers })
    socket.once("open", () => {
      socket.close()
      resolve(101)
    })
    socket.once("unexpected-response", (_request, response) => {
      resolve(response.statusCode ?? 0)
      socket.terminate()
    })
    socket.once("error", () => resolve(0))
  })

beforeAll(async () => {
  assetsDir = tempDir("mnemos-dashboard-assets-")
  await buildDashboard(assetsDir)
  daemon = await startDaemon({ env: { MNEMOS_DASHBOARD_DIR: assetsDir } })
  client = await connectClient("streamable-http", daemon.url, { name: "claude-code" })
  seeded = await seedGraph(client)
  await seedEverythingElse(client)
  browser = await launchChromium()
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: "dark" })
  page = await context.newPage()
  problems = watchProblems(page)
}, 180_000)

afterEach(async (context) => {
  if (page !== undefined && (context.task.result?.errors?.length ?? 0) > 0)
    await screenshot(page, `failed-${context.task.name.slice(0, 40).replace(/\W+/g, "-")}`).catch(() => undefined)
})

afterAll(async () => {
  await browser?.close()
  await cleanup()
}, 60_000)

describe("access", () => {
  it("the API and the live feed refuse without a login; the bearer token of the data directory works", async () => {
    expect((await getJson(`${daemon.url}/api/stats`)).status).toBe(401)
    expect((await getJson(`${daemon.url}/api/tasks`)).status).toBe(401)
    expect(await upgradeStatus(daemon.url)).toBe(401)
    const bearer = { authorization: `Bearer ${readToken(daemon.dataDir)}` }
    expect((await getJson(`${daemon.url}/api/stats`, { headers: bearer })).status).toBe(200)
    expect(await upgradeStatus(daemon.url, bearer)).toBe(101)
    // The page itself holds no data and loads without a login.
    expect((await getJson(`${daemon.url}/`)).status).toBe(200)
  })

  it("the one-time link becomes an HttpOnly, SameSite=Strict cookie, and works only once", async () => {
    const url = loginUrl(daemon)
    await page.goto(url)
    await page.waitForURL(`${daemon.url}/`)
    await expect.poll(() => page.getByTestId("connection").textContent()).toBe("Live")
    const [cookie] = await context.cookies()
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" })
    expect(cookie!.name).toBe(`mnemos_dashboard_${daemon.port}`)

    const stranger = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: "dark" })
    const other = await stranger.newPage()
    await other.goto(url)
    await other.waitForURL(/login=expired/)
    await other.getByRole("heading", { name: "Log in to mnemos" }).waitFor()
    await other.getByText("already used or has expired").waitFor()
    await screenshot(other, "login")
    await stranger.close()
  })
})

describe("mnemos dashboard", () => {
  it("prints a fresh one-time link to the running daemon; minting one needs the bearer token", async () => {
    const result = await runCli(["dashboard", "--data-dir", daemon.dataDir])
    expect(result.code, result.output).toBe(0)
    const url = /http:\/\/\S+\?token=\S+/.exec(result.output)?.[0]
    expect(url).toContain(`127.0.0.1:${daemon.port}/?token=`)
    const first = await fetch(url!, { redirect: "manual" })
    expect(first.status).toBe(303)
    expect(first.headers.get("set-cookie")).toContain(`mnemos_dashboard_${daemon.port}=`)
    const again = await fetch(url!, { redirect: "manual" })
    expect(again.headers.get("location")).toBe("/?login=expired")
    const cookie = first.headers.get("set-cookie")!.split(";", 1)[0]!
    const minted = await fetch(`${daemon.url}/api/dashboard/token`, { method: "POST", headers: { cookie } })
    expect(minted.status).toBe(403)
  })

  it("says how to start a daemon when none serves the data directory", async () => {
    const result = await runCli(["dashboard", "--data-dir", tempDir("mnemos-no-daemon-"), "--port", "9"])
    expect(result.code).toBe(1)
    expect(result.output).toContain("no mnemos daemon serves")
    expect(result.output).toContain("mnemos serve --data-dir")
  })
})

describe("graph", () => {
  it("draws the seeded graph on WebGL", async () => {
    await page.getByText(`${seeded.entities} entities`).waitFor()
    await page.getByText(`${seeded.relations} relations`).waitFor()
    await page.getByRole("button", { name: "Run layout" }).waitFor({ timeout: 60_000 })
    await page.waitForTimeout(300)
    const canvas = decodePng(await page.getByTestId("graph-canvas").screenshot({ mask: [page.locator(".legend")] }))
    for (const type of ["file", "module", "library", "service"])
      expect(pixelsNear(canvas, await typeColor(type)), `pixels in the colour of ${type}`).toBeGreaterThan(20)
    await screenshot(page, "graph")
  }, 90_000)

  it("search focuses an entity; its observations, relations and history open", async () => {
    const search = page.getByRole("combobox", { name: "Find an entity" })
    await search.fill("checkout-se")
    await page.getByRole("option", { name: /checkout-service/ }).waitFor()
    await search.press("Enter")
    const panel = page.getByTestId("entity-panel")
    await panel.getByRole("heading", { name: "checkout-service" }).waitFor()
    await panel.locator(".observations").getByText("Retries payment calls with an idempotency key").waitFor()
    await panel.getByRole("button", { name: "checkout/api" }).waitFor()
    await panel.getByText("created as service").waitFor()
    await page.waitForTimeout(900) // the camera flies to the node
    await screenshot(page, "graph-details")
  })

  it("filters by entity type", async () => {
    const files = page.getByRole("button", { name: /^file\b/ })
    const fileColor = await typeColor("file")
    await files.click()
    expect(await files.getAttribute("aria-pressed")).toBe("false")
    await page.getByTestId("entity-panel").getByRole("button", { name: "Close details" }).click()
    await page.waitForTimeout(200)
    const canvas = decodePng(await page.getByTestId("graph-canvas").screenshot({ mask: [page.locator(".legend")] }))
    expect(pixelsNear(canvas, fileColor)).toBeLessThan(20)
    await files.click()
    expect(await files.getAttribute("aria-pressed")).toBe("true")
  })

  it("a new entity written through MCP appears live", async () => {
    const acked = Date.now()
    await tool("create_entities", {
      entities: [{ name: "dashboard-service", entityType: "service", observations: ["Serves the Brain Monitor"] }],
    })
    await waitFor(
      "the new entity",
      async () => ((await page.getByText(`${seeded.entities + 1} entities`).count()) > 0 ? true : undefined),
      liveShownWithinMs,
      20,
    )
    console.log(`live: the new entity showed ${Date.now() - acked} ms after create_entities was acknowledged`)
  })
})

describe("tasks", () => {
  const title = "Wire the dashboard into CI"
  let taskId: string

  it("a task created through MCP appears on the board live, without a reload", async () => {
    await shortcut("2")
    await page.getByRole("heading", { name: "Tasks", exact: true }).waitFor()
    await page.getByTestId("board").waitFor()
    await page.evaluate(() => {
      window.notReloaded = true
    })
    const created = await tool("add_task", { title, priority: "high", tags: ["ci"], assignee: "claude-code" })
    const acked = Date.now()
    taskId = (created.task as { id: string }).id
    const elapsed = await timeUntilVisible(title, acked)
    console.log(`live: the new task showed ${elapsed} ms after add_task was acknowledged`)
    await page.getByTestId("column-todo").getByTestId("task-card").filter({ hasText: title }).waitFor()
    expect(await page.evaluate(() => window.notReloaded)).toBe(true)
  })

  it("dragging the card to Done persists: MCP reads it back as done", async () => {
    const card = page.getByTestId("task-card").filter({ hasText: title })
    await card.dragTo(page.getByTestId("column-done"))
    await page.getByTestId("column-done").getByTestId("task-card").filter({ hasText: title }).waitFor()
    const done = await waitFor("the task to be done", async () => {
      const listed = (await tool("list_tasks", { status: "done" })).tasks as Array<{ id: string; status: string }>
      return listed.find((task) => task.id === taskId)
    })
    expect(done.status).toBe("done")
  })

  it("a card moves by keyboard too (Shift+→), and MCP reads the new column", async () => {
    const card = page.getByTestId("task-card").filter({ hasText: "Document the WAL record format" })
    await card.getByRole("button", { name: /^Move/ }).focus()
    await page.keyboard.press("Shift+ArrowRight")
    await page
      .getByTestId("column-doing")
      .getByTestId("task-card")
      .filter({ hasText: "Document the WAL record format" })
      .waitFor()
    await waitFor("the task to be doing", async () => {
      const listed = (await tool("list_tasks", { status: "doing" })).tasks as Array<{ title: string }>
      return listed.find((task) => task.title === "Document the WAL record format")
    })
    await page.mouse.move(0, 0)
    await page.waitForTimeout(2600) // let the highlight of the moved cards fade
    await screenshot(page, "tasks")
  })
})

describe("search", () => {
  it("shows ranked hits, each with its score breakdown", async () => {
    await shortcut("/")
    await page.getByRole("heading", { name: "Search", exact: true }).waitFor()
    // "/" focuses the search box once the view has rendered (a frame after the heading appears).
    await page.waitForFunction(() => document.activeElement?.id === "omni-search", undefined, { timeout: 5_000 })
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("omni-search")
    await page.keyboard.type("idempotency retries")
    const hits = page.getByTestId("hit")
    await hits.first().waitFor()
    expect(await hits.count()).toBeGreaterThanOrEqual(2)
    const scores = (await page.locator(".hit .score-value").allTextContents()).map(Number)
    expect(scores.length).toBeGreaterThanOrEqual(2)
    expect([...scores].sort((a, b) => b - a)).toEqual(scores)
    const breakdown = hits.first().getByLabel("score breakdown")
    for (const part of ["full text", "meaning", "recency", "importance"]) await breakdown.getByText(part).waitFor()
    // A conversation turn is typed by its role, as the mem-* tools show it (seed 000's types).
    await hits.filter({ hasText: "without an idempotency key" }).getByText("conversations/response").waitFor()
    await screenshot(page, "search")
  })
})

describe("the other views", () => {
  it("activity shows every write as it happens", async () => {
    await shortcut("5")
    const feed = page.getByTestId("activity-feed")
    await feed.waitFor()
    await tool("add_observations", {
      observations: [{ entityName: "gateway-service", contents: ["Rate limits per API key"] }],
    })
    await feed.getByText("added 1 observation to gateway-service").waitFor({ timeout: 5000 })
    await page.waitForTimeout(400)
    await screenshot(page, "activity")
  })

  it("notes show sticky notes, handoffs and session summaries, live", async () => {
    await shortcut("3")
    await page.getByText("Never bump lmdb without running the kill -9 suite.").waitFor()
    await page.getByText("Checkout retries are half done").waitFor()
    await page.getByText("Made the search index catch up after restarts").waitFor()
    const acked = Date.now()
    await tool("add_sticky_note", {
      text: "Dashboard screenshots come from the test run.",
      color: "green",
      tags: ["docs"],
    })
    const elapsed = await timeUntilVisible("Dashboard screenshots come from the test run.", acked)
    console.log(`live: the new note showed ${elapsed} ms after add_sticky_note was acknowledged`)
    await page.waitForTimeout(2600)
    await screenshot(page, "notes")
  })

  it("conversations list sessions, then their messages", async () => {
    await shortcut("6")
    await page.getByRole("button", { name: /debug-checkout/ }).click()
    await page
      .locator(".message-content")
      .getByText("Checkout double-charges when the payment provider times out")
      .waitFor()
    await tool("write_message", {
      session_id: "debug-checkout",
      role: "assistant",
      content: "Server-side dedup is merged.",
    })
    await page.locator(".message-content").getByText("Server-side dedup is merged.").waitFor({ timeout: 5000 })
    await screenshot(page, "conversations")
  })

  it("gates show each action's status", async () => {
    await shortcut("7")
    const deploy = page.getByRole("row", { name: /deploy/ })
    await deploy.getByText("blocked").first().waitFor()
    await page.getByRole("row", { name: /push/ }).getByText("authorized").first().waitFor()
    await screenshot(page, "gates")
  })

  it("stats show counts, sizes, write rate, search latency, restarts and index lag", async () => {
    await shortcut("8")
    const kpis = page.getByTestId("kpis")
    for (const label of [
      "Entities",
      "Relations",
      "Write rate",
      "Search latency",
      "Actor restarts",
      "Index lag",
      "On disk",
    ])
      await kpis.getByText(label, { exact: true }).waitFor()
    await kpis.getByText(String(seeded.entities + 1), { exact: true }).waitFor()
    await page.getByTestId("stores-table").getByRole("row", { name: /graph/ }).waitFor()
    await page.waitForTimeout(500)
    await screenshot(page, "stats")
  })

  it("follows the system's light theme", async () => {
    await page.emulateMedia({ colorScheme: "light" })
    await shortcut("2")
    await page.getByTestId("board").waitFor()
    expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe("light")
    await screenshot(page, "tasks-light")
    await shortcut("1")
    await page.getByRole("button", { name: "Fit the whole graph" }).click()
    await page.waitForTimeout(800)
    await screenshot(page, "graph-light")
    await page.emulateMedia({ colorScheme: "dark" })
  })
})

describe("connection", () => {
  it("says when the daemon is unreachable, and reconnects without a new login", async () => {
    await shortcut("2")
    await page.getByTestId("board").waitFor()
    const from = Date.now()
    const { dataDir, port, udpPort } = daemon
    await daemon.stop("SIGTERM")
    await page.getByTestId("offline-banner").waitFor({ timeout: 15_000 })
    expect(await page.getByTestId("connection").textContent()).toBe("Offline")
    await screenshot(page, "offline")

    daemon = await startDaemon({ dataDir, port, udpPort, env: { MNEMOS_DASHBOARD_DIR: assetsDir } })
    await page.getByTestId("reconnected-banner").waitFor({ timeout: 20_000 })
    outages.push({ from, to: Date.now() })
    expect(await page.getByTestId("connection").textContent()).toBe("Live")
    client = await connectClient("streamable-http", daemon.url, { name: "claude-code" })
    const acked = Date.now()
    await tool("add_task", { title: "Back after the restart" })
    const elapsed = await timeUntilVisible("Back after the restart", acked)
    console.log(`live: after the restart, the new task showed ${elapsed} ms after add_task was acknowledged`)
  }, 90_000)
})

describe("scale", () => {
  it("a 10,000-entity graph loads, lays out in a worker and keeps the page responsive", async () => {
    const project = "big"
    const count = 10_000
    // 40 communities of 250, linked mostly inside their community: the shape real memories have.
    const communities = 40
    const communityOf = (index: number) => index % communities
    const entities = Array.from({ length: count }, (_, index) => ({
      name: `node-${index}`,
      entityType: ["service", "module", "file", "library", "concept", "person", "decision", "bug"][
        communityOf(index) % 8
      ]!,
      observations: [],
    }))
    const relations = Array.from({ length: count * 2 }, (_, edge) => {
      const index = edge % count
      const hop = (edge * 7919 + 13 + Math.floor(edge / count) * 4243) % count
      const to = edge % 25 === 0 ? hop : hop - communityOf(hop) + communityOf(index)
      return { from: `node-${index}`, to: `node-${to}`, relationType: "links" }
    }).filter((relation) => relation.from !== relation.to)
    // The official graph tools act in the connection's project: a client whose root is …/big writes there.
    const bulk = new Client(
      { name: "bulk-loader", version: "1.0.0" },
      { capabilities: { roots: { listChanged: false } } },
    )
    bulk.setRequestHandler(ListRootsRequestSchema, async () => ({
      roots: [{ uri: `file:///work/${project}`, name: project }],
    }))
    await bulk.connect(await clientTransport("streamable-http", daemon.url))
    // At most 10,000 items per call (batchItemsMax).
    for (const [name, args] of [
      ["create_entities", { entities }],
      ["create_relations", { relations: relations.slice(0, count) }],
      ["create_relations", { relations: relations.slice(count) }],
    ] as const) {
      const result = await callTool(bulk, name, args)
      expect(result.isError, result.text.slice(0, 200)).toBe(false)
    }
    await bulk.close()

    await shortcut("1")
    await page.getByRole("combobox", { name: "Project" }).waitFor()
    await waitFor("the big project in the picker", async () =>
      (await page.getByRole("combobox", { name: "Project" }).locator("option").allTextContents()).includes(project)
        ? true
        : undefined,
    )
    const started = Date.now()
    await page.getByRole("combobox", { name: "Project" }).selectOption(project)
    await page.getByText("10,000 entities").waitFor({ timeout: 60_000 })
    const loadMs = Date.now() - started
    // While the layout runs (in its worker), measure how often the page gets to draw.
    const frames = await page.evaluate(
      () =>
        new Promise<{ frames: number; longestGapMs: number }>((resolve) => {
          let frames = 0
          let last = performance.now()
          let longestGapMs = 0
          const until = last + 3000
          const tick = (now: number) => {
            frames++
            longestGapMs = Math.max(longestGapMs, now - last)
            last = now
            if (now < until) requestAnimationFrame(tick)
            else resolve({ frames, longestGapMs })
          }
          requestAnimationFrame(tick)
        }),
    )
    console.log(
      `10k graph: loaded in ${loadMs} ms; ${frames.frames} frames in 3 s, longest gap ${Math.round(frames.longestGapMs)} ms`,
    )
    const typed = Date.now()
    await page.getByRole("combobox", { name: "Find an entity" }).fill("node-4242")
    await page.getByRole("option", { name: /node-4242/ }).waitFor({ timeout: 60_000 })
    const answerMs = Date.now() - typed
    // The times are logged, not asserted (the machine is shared; speed is the benchmarks' job):
    // what is asserted is that the page kept drawing while the layout ran, and that it answered.
    console.log(`10k graph: search answered in ${answerMs} ms`)
    expect(frames.frames).toBeGreaterThan(3)
    await page.keyboard.press("Escape")
    await page.getByRole("button", { name: "Run layout" }).waitFor({ timeout: 40_000 })
    await page.getByRole("button", { name: "Fit the whole graph" }).click()
    await page.waitForTimeout(600)
    await screenshot(page, "graph-10k", "jpeg")
    await page.getByRole("combobox", { name: "Project" }).selectOption("default")
  }, 180_000)
})

describe("console", () => {
  it("no console errors or uncaught exceptions (beyond the refused connections of the deliberate outage)", () => {
    const during = (at: number) => outages.some((outage) => at >= outage.from && at <= outage.to)
    const expected = (text: string) =>
      /ERR_CONNECTION_REFUSED|WebSocket connection to .* failed|Failed to load resource/.test(text)
    const unexpected = problems.problems.filter((problem) => !(during(problem.at) && expected(problem.text)))
    expect(unexpected.map((problem) => problem.text)).toEqual([])
  })
})
