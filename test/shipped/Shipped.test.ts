/**
 * The shipped product, tested as users run it: `npm pack`, the tarball installed into an empty
 * directory (product.ts), and its `mnemos` driven over each way in — the stdio shim (`mnemos
 * mcp`), `serve --stdio`, Streamable HTTP and WebSocket — on the Node.js of MNEMOS_TEST_NODE
 * (.ci/run runs this file on Node 22 and 24 from the npm registry besides the machine's).
 *
 * Every tool `tools/list` offers (all toolsets) is called with valid arguments and must succeed:
 * editor tools against a real headless Neovim and real TypeScript and Python files, the clipboard
 * under a virtual X server. A tool added without a call here fails the test.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire, isBuiltin } from "node:module"
import { availableParallelism } from "node:os"
import { dirname, join, sep } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { open } from "lmdb"
import { PNG } from "pngjs"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { allocatorEnv, helperThreadsFor } from "../../src/runtime/AllocatorEnv.ts"
import { schedBatch } from "../../src/runtime/ThreadPolicy.ts"
import { builtinCatalogue, defaultModelName, fileUrl } from "../../src/search/embedding/ModelCatalogue.ts"
import { modelDirOf, pullModel } from "../../src/search/embedding/ModelFolder.ts"
import { mainThreadDocumentsMax } from "../../src/search/Indexer.ts"
import { searchThreadYoungGenerationMb } from "../../src/search/thread/SearchThread.ts"
import { keyedDatabase } from "../../src/stores/checkpoint/KeyCodec.ts"
import { lacks, startNeovim, startXvfb } from "../editor/harness.ts"
import { closedPort, startHub, tinyModel } from "../search/hubServer.ts"
import { onSseEvents } from "../support/gatedTransports.ts"
import { threadsUnder } from "../support/threads.ts"
import {
  authHeaders,
  cleanup,
  connectClient,
  type DaemonProcess,
  freePort,
  isAlive,
  type NetworkTransport,
  startDaemon,
  tempDir,
  waitFor,
} from "../transports/harness.ts"
import { installedProduct, leftByAnEarlierBuild, type Product, productNode, productNodeVersion } from "./product.ts"

let product: Product
let daemon: DaemonProcess
let workspace: string
let nvimAddress: string
let display: string | undefined
const started: Array<ChildProcess> = []

/** PATH with the product's Node first, so that a daemon a shim starts runs on it too. */
const productEnv = (): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${dirname(productNode)}:${process.env.PATH ?? ""}`,
  NVIM: nvimAddress,
  ...(display !== undefined ? { DISPLAY: display } : {}),
})

/** Starts Xvfb on a free display; undefined where it is not installed (outside CI). */
const startDisplay = async (): Promise<string | undefined> => {
  if (lacks("Xvfb") || lacks("xclip")) return undefined
  const xvfb = await startXvfb()
  started.push(xvfb.process)
  return xvfb.display
}

beforeAll(async () => {
  product = installedProduct()
  workspace = tempDir("mnemos-shipped-ws-")
  writeFileSync(
    join(workspace, "shapes.ts"),
    "export interface Shape { area(): number }\nexport class Square implements Shape {\n  constructor(private side: number) {}\n  area() { return this.side * this.side }\n}\n",
  )
  writeFileSync(
    join(workspace, "tool.py"),
    "def greet(name):\n    return f'hello {name}'\n\nclass Greeter:\n    pass\n",
  )
  execFileSync("git", ["init", "-q", workspace])
  execFileSync("git", ["-C", workspace, "add", "."])
  execFileSync(
    "git",
    ["-C", workspace, "-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-qm", "shapes"],
    { stdio: "ignore" },
  )
  if (lacks("nvim")) throw new Error("the built-artifact tests need nvim (Debian package neovim)")
  const nvim = await startNeovim([join(workspace, "shapes.ts")])
  nvimAddress = nvim.address
  display = await startDisplay()
  daemon = await startDaemon({
    cli: { node: productNode, file: product.cli },
    args: ["--nvim-allow-lua", "--toolsets", "all"],
    env: productEnv() as Record<string, string>,
  })
}, 600_000)

afterAll(async () => {
  await cleanup()
  for (const child of started) child.kill("SIGKILL")
})

/** The `--v8-pool-size` flags process `pid` was started with. */
const helperThreadFlags = (pid: number) =>
  readFileSync(`/proc/${pid}/cmdline`, "utf8")
    .split("\0")
    .filter((arg) => arg.startsWith("--v8-pool-size"))

/** What a daemon started by the product is given on this machine (src/runtime/AllocatorEnv.ts). */
const expectedHelperThreadFlags = ((threads) => (threads === undefined ? [] : [`--v8-pool-size=${threads}`]))(
  helperThreadsFor(availableParallelism()),
)

/** What a call answered: its text, parsed as JSON where it is. */
interface Answer {
  readonly isError: boolean
  readonly text: string
  readonly json: unknown
  readonly images: ReadonlyArray<{ readonly data: string; readonly mimeType: string }>
}

const call = async (client: Client, name: string, args: Record<string, unknown>): Promise<Answer> => {
  const raw = (await client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as CallToolResult
  const text = raw.content?.find((part) => part.type === "text")?.text ?? ""
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  const images = (raw.content ?? []).flatMap((part) =>
    part.type === "image" ? [{ data: part.data, mimeType: part.mimeType }] : [],
  )
  return { isError: raw.isError === true, text, json, images }
}

/** The first string under a key `key` in `value`, depth first. */
const findString = (value: unknown, key: string): string | undefined => {
  if (Array.isArray(value)) {
    for (const item of value) {
      const found = findString(item, key)
      if (found !== undefined) return found
    }
  } else if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>
    if (typeof record[key] === "string") return record[key] as string
    for (const item of Object.values(record)) {
      const found = findString(item, key)
      if (found !== undefined) return found
    }
  }
  return undefined
}

/** Ids the calls below take from earlier answers. */
type Ids = Map<string, string>

/** One call: the tool, its arguments (from the ids so far), and the id its answer gives. */
interface Step {
  readonly tool: string
  readonly args: (ids: Ids) => Record<string, unknown>
  /** Keep `findString(answer, key ?? "id")` as `as`, or what `pattern`'s group matches in its text. */
  readonly keep?: { readonly as: string; readonly key?: string; readonly pattern?: RegExp }
  /** What this call's answer must say, beyond succeeding (besides `expectations` for its tool). */
  readonly expect?: (answer: Answer) => void
}

const id = (ids: Ids, name: string): string => {
  const value = ids.get(name)
  if (value === undefined) throw new Error(`no ${name} id from an earlier call`)
  return value
}

/** A call of every tool, in an order where each finds what it needs. */
const steps = (): ReadonlyArray<Step> => [
  // graph
  {
    tool: "create_entities",
    args: () => ({
      entities: [
        { name: "Shipped", entityType: "project", observations: ["installed from the tarball"] },
        { name: "Packed", entityType: "artifact", observations: ["made by npm pack"] },
        { name: "Old name", entityType: "artifact", observations: ["merged away"] },
      ],
    }),
  },
  { tool: "create_relations", args: () => ({ relations: [{ from: "Shipped", to: "Packed", relationType: "ships" }] }) },
  { tool: "add_observations", args: () => ({ observations: [{ entityName: "Shipped", contents: ["tested"] }] }) },
  { tool: "read_graph", args: () => ({}) },
  { tool: "search_nodes", args: () => ({ query: "tarball" }) },
  { tool: "open_nodes", args: () => ({ names: ["Shipped"] }) },
  { tool: "read_graph_summary", args: () => ({}) },
  { tool: "graph_neighbors", args: () => ({ names: ["Shipped"], depth: 1 }) },
  { tool: "get_entity_details", args: () => ({ names: ["Packed"] }) },
  { tool: "merge_entities", args: () => ({ target: "Packed", sources: ["Old name"] }) },
  { tool: "delete_observations", args: () => ({ deletions: [{ entityName: "Shipped", observations: ["tested"] }] }) },
  { tool: "delete_relations", args: () => ({ relations: [{ from: "Shipped", to: "Packed", relationType: "ships" }] }) },
  { tool: "search_graph", args: () => ({ query: "npm pack" }) },
  // conversations
  {
    tool: "write_message",
    args: () => ({ session_id: "shipped", role: "user", content: "does the tarball work on every Node?" }),
    keep: { as: "message", key: "message_id" },
  },
  { tool: "write_message", args: () => ({ session_id: "shipped", role: "assistant", content: "it does" }) },
  { tool: "read_messages", args: () => ({ session_id: "shipped" }) },
  { tool: "search_messages", args: () => ({ query: "tarball" }) },
  { tool: "update_message", args: (ids) => ({ message_id: id(ids, "message"), content: "does it work everywhere?" }) },
  { tool: "get_system_health", args: () => ({}) },
  { tool: "rebuild_index", args: () => ({}) },
  // engineering records
  { tool: "add_task", args: () => ({ title: "ship it", priority: "high" }), keep: { as: "task" } },
  { tool: "update_task", args: (ids) => ({ id: id(ids, "task"), status: "doing" }) },
  { tool: "list_tasks", args: () => ({}) },
  { tool: "complete_task", args: (ids) => ({ id: id(ids, "task"), note: "shipped" }) },
  {
    tool: "record_adr",
    args: () => ({ title: "Pack what we test", context: "tests ran sources", decision: "test the tarball" }),
    keep: { as: "adr" },
  },
  { tool: "update_adr", args: (ids) => ({ id: id(ids, "adr"), status: "accepted" }) },
  { tool: "list_adrs", args: () => ({}) },
  { tool: "add_sticky_note", args: () => ({ text: "remember the tarball", tags: ["release"] }), keep: { as: "note" } },
  { tool: "list_sticky_notes", args: () => ({}) },
  { tool: "remove_sticky_note", args: (ids) => ({ id: id(ids, "note") }) },
  {
    tool: "add_session_summary",
    args: () => ({ summary: "tested the tarball", next_steps: ["release"] }),
    keep: { as: "summary" },
  },
  { tool: "list_session_summaries", args: () => ({}) },
  { tool: "add_milestone", args: () => ({ title: "0.1 shipped" }), keep: { as: "milestone" } },
  {
    tool: "archive_session_summaries",
    args: (ids) => ({ ids: [id(ids, "summary")], milestone_id: id(ids, "milestone") }),
  },
  { tool: "add_handoff", args: () => ({ to_agent: "releaser", summary: "publish it" }), keep: { as: "handoff" } },
  { tool: "acknowledge_handoff", args: (ids) => ({ id: id(ids, "handoff") }) },
  { tool: "list_handoffs", args: () => ({}) },
  { tool: "pin_file", args: () => ({ path: join(workspace, "shapes.ts"), note: "the example" }) },
  { tool: "save_context_workspace", args: () => ({ name: "release", pinned_files: [join(workspace, "shapes.ts")] }) },
  { tool: "load_context_workspace", args: () => ({ name: "release" }) },
  { tool: "unpin_file", args: () => ({ path: join(workspace, "shapes.ts") }) },
  { tool: "log_code_change", args: () => ({ summary: "launcher imports", change_type: "fix", cwd: workspace }) },
  { tool: "log_error_fix", args: () => ({ error_signature: "dynamic import callback", fix: "launcher imports" }) },
  { tool: "log_tech_debt", args: () => ({ description: "Node 20 cache", severity: "low", location: "Launcher.ts" }) },
  { tool: "add_snippet", args: () => ({ title: "pack", code: "npm pack", language: "sh" }) },
  { tool: "add_pr_checklist_item", args: () => ({ pr: "#27", text: "tarball tested" }), keep: { as: "checklist" } },
  { tool: "update_pr_checklist_item", args: (ids) => ({ id: id(ids, "checklist"), checked: true }) },
  { tool: "register_environment", args: () => ({ name: "ci", environment_type: "ci" }) },
  { tool: "list_engineering_records", args: () => ({ kind: "snippet" }) },
  // gates and audit
  { tool: "gate_set", args: () => ({ action: "publish", status: "authorized", reason: "tests pass" }) },
  { tool: "gate_verify", args: () => ({ action: "publish" }) },
  { tool: "gate_list", args: () => ({}) },
  { tool: "query_audit", args: () => ({ limit: 5 }) },
  // search
  { tool: "mem-search", args: () => ({ query: "tarball" }), keep: { as: "memory", pattern: /\[(mem:[^\]]+)\]/ } },
  { tool: "mem-timeline", args: (ids) => ({ ids: [id(ids, "memory")] }) },
  { tool: "mem-details", args: (ids) => ({ ids: [id(ids, "memory")] }) },
  { tool: "mem-stats", args: () => ({}) },
  { tool: "omni_search", args: () => ({ query: "tarball" }) },
  // the end of the conversation and the graph records above
  { tool: "delete_message", args: (ids) => ({ message_id: id(ids, "message") }) },
  { tool: "delete_entities", args: () => ({ entityNames: ["Packed"] }) },
  // editor
  { tool: "nvim_get_active_buffer", args: () => ({}) },
  { tool: "nvim_get_cursor", args: () => ({}) },
  { tool: "nvim_goto_line", args: () => ({ line: 2 }) },
  { tool: "nvim_list_buffers", args: () => ({}) },
  { tool: "nvim_get_visual_selection", args: () => ({}) },
  {
    tool: "nvim_set_diagnostics",
    args: () => ({ diagnostics: [{ line: 1, message: "shipped check", severity: "warning" }] }),
  },
  { tool: "nvim_get_diagnostics", args: () => ({}) },
  { tool: "nvim_execute_lua", args: () => ({ code: "return 6 * 7" }) },
  { tool: "read_file_skeleton", args: () => ({ path: join(workspace, "shapes.ts") }) },
  { tool: "read_file_skeleton", args: () => ({ path: join(workspace, "tool.py") }) },
  { tool: "get_active_worktree_context", args: () => ({ path: workspace }) },
  { tool: "get_recent_logs", args: () => ({}) },
  { tool: "clipboard_write", args: () => ({ content: "copied from the tarball" }) },
  {
    tool: "clipboard_read",
    args: () => ({ format: "text" }),
    expect: (answer) => assert.include(answer.text, "copied from the tarball"),
  },
  {
    tool: "clipboard_write",
    args: () => ({ format: "image", rgba: Buffer.from(redSquare.data).toString("base64"), width: 8, height: 8 }),
  },
  {
    tool: "clipboard_read",
    args: () => ({ format: "image", encoding: "png" }),
    expect: (answer) => {
      assert.deepStrictEqual(
        answer.images.map((image) => image.mimeType),
        ["image/png"],
      )
      const png = PNG.sync.read(Buffer.from(answer.images[0]!.data, "base64"))
      assert.deepStrictEqual(new Uint8Array(png.data), redSquare.data)
    },
  },
  {
    tool: "clipboard_read",
    args: () => ({ format: "image", quality: 90 }),
    expect: (answer) => assert.strictEqual(answer.images[0]?.mimeType, "image/jpeg"),
  },
  { tool: "toggle_clipboard_watch_mode", args: () => ({ enabled: false }) },
]

/** An 8×8 opaque red square, the image put on the clipboard. */
const redSquare = { data: new Uint8Array(8 * 8 * 4).map((_, at) => (at % 4 === 0 || at % 4 === 3 ? 255 : 0)) }

/** What some answers must say, beyond succeeding. */
const expectations: Record<string, (answer: Answer) => void> = {
  read_file_skeleton: (answer) => assert.match(answer.text, /Square|greet/),
  nvim_execute_lua: (answer) => assert.include(answer.text, "42"),
  nvim_get_active_buffer: (answer) => assert.include(answer.text, "class Square"),
}

/** Tools that need a display, where the machine has none (outside CI only). */
const needsDisplay = new Set(["clipboard_write", "clipboard_read", "toggle_clipboard_watch_mode"])

const callEveryTool = async (client: Client) => {
  const { tools } = await client.listTools()
  const listed = new Set(tools.map((tool) => tool.name))
  const planned = steps()
  const called = new Set(planned.map((step) => step.tool))
  assert.deepStrictEqual(
    [...listed].filter((name) => !called.has(name)),
    [],
    "tools/list offers tools this test does not call",
  )
  const ids: Ids = new Map()
  const failures: Array<string> = []
  for (const step of planned) {
    if (display === undefined && needsDisplay.has(step.tool)) continue
    const answer = await call(client, step.tool, step.args(ids))
    if (answer.isError) {
      failures.push(`${step.tool}: ${answer.text.slice(0, 300)}`)
      continue
    }
    expectations[step.tool]?.(answer)
    step.expect?.(answer)
    if (step.keep !== undefined) {
      const kept =
        step.keep.pattern !== undefined
          ? step.keep.pattern.exec(answer.text)?.[1]
          : findString(answer.json, step.keep.key ?? "id")
      if (kept === undefined) throw new Error(`${step.tool} answered no ${step.keep.key ?? "id"}: ${answer.text}`)
      ids.set(step.keep.as, kept)
    }
  }
  assert.deepStrictEqual(failures, [], "calls that failed")
}

const shimClient = async (dataDir: string, port: number): Promise<Client> => {
  const transport = new StdioClientTransport({
    command: productNode,
    args: [product.cli, "mcp", "--data-dir", dataDir, "--port", String(port), "--no-start"],
    cwd: workspace,
    env: productEnv() as Record<string, string>,
    stderr: "pipe",
  })
  const client = new Client({ name: "shipped-shim", version: "1.0.0" })
  await client.connect(transport)
  return client
}

/** Runs the installed `mnemos` with `args`, `input` on its stdin and `env` added; resolves when it exits. */
const runProductWith = (args: ReadonlyArray<string>, input: string, env: NodeJS.ProcessEnv) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(productNode, [product.cli, ...args], { cwd: workspace, env: { ...productEnv(), ...env } })
    started.push(child)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.once("error", reject)
    child.once("exit", (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(input)
  })

/** Runs the installed `mnemos` with `args`, `input` on its stdin; resolves when it exits. */
const runProduct = (args: ReadonlyArray<string>, input = "") => runProductWith(args, input, {})

const line = (message: Record<string, unknown>) => `${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`
const initialize = line({
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "script", version: "0" } },
})
const initialized = line({ method: "notifications/initialized" })
const noteCall = (requestId: number, text: string) =>
  line({ id: requestId, method: "tools/call", params: { name: "add_sticky_note", arguments: { text } } })

const answersOf = (stdout: string) =>
  stdout
    .split("\n")
    .filter((text) => text.trim() !== "")
    .map((text) => JSON.parse(text) as { id?: unknown; result?: CallToolResult; error?: unknown })

describe(`the installed product on Node ${productNodeVersion}`, () => {
  it("prints its version and help", async () => {
    const version = await runProduct(["--version"])
    assert.strictEqual(version.code, 0, version.stderr)
    assert.include(version.stdout, product.version)
    const help = await runProduct(["--help"])
    assert.strictEqual(help.code, 0, help.stderr)
    assert.include(help.stdout, "serve")
  })

  it("holds only what this build made: a file an earlier build left in dist/ is not shipped", () => {
    const dist = dirname(product.cli)
    assert.isTrue(existsSync(join(dist, "tools", "McpServer.js")), "the build's own files are there")
    assert.isFalse(existsSync(join(dist, "tools", leftByAnEarlierBuild)), "a stale file was packed")
  })

  it("every package the bundle leaves outside it resolves inside the installed product", () => {
    // The product sits inside the repository (test-results/), so a package missing from its own
    // node_modules would still load, from the repository's: this is what would catch it.
    const bundle = join(dirname(product.cli), "bundle", "cli.cjs")
    const text = readFileSync(bundle, "latin1")
    const required = [...text.matchAll(/require\("([^".][^"]*)"\)/g)].map((match) => match[1]!)
    // lmdb-js is bundled, and finds its addon from its installed directory (scripts/bundle.mjs).
    if (text.includes('.resolve("lmdb")')) required.push("lmdb")
    const packages = [...new Set(required)].filter((name) => !isBuiltin(name))
    assert.includeMembers(packages, ["lmdb", "onnxruntime-node"])
    // The session's protocol is mnemos's own (src/tools/McpServer.ts): neither the SDK's server, its
    // Zod schemas nor its JSON Schema validator is loaded by any start.
    assert.notInclude(packages, "ajv")
    assert.notMatch(text, /_zod|class Protocol\b|ajv-provider/)
    const resolveFromBundle = createRequire(bundle).resolve
    const outside = packages.flatMap((name) => {
      try {
        const file = resolveFromBundle(name)
        return file.startsWith(join(product.appDir, "node_modules") + sep) ? [] : [`${name}: ${file}`]
      } catch {
        // ws's optional native helper: ws works without it.
        return name === "utf-8-validate" ? [] : [`${name}: not found`]
      }
    })
    assert.deepStrictEqual(outside, [], "packages the installed product does not have itself")
  })

  it("health shows the daemon's search index: its state, where it runs, what it holds, the heaps", async () => {
    const health = await runProduct(["health", "--data-dir", daemon.dataDir])
    assert.strictEqual(health.code, 0, health.stderr)
    assert.match(
      health.stdout,
      /search index: (cold|warming|warm), (on the main thread|on a worker thread|not started), \d+ document\(s\) \(full text \d+\.\d MiB\), \d+ vector\(s\)/,
    )
    assert.match(health.stdout, /main thread's heap \d+\.\d MiB used of \d+\.\d MiB/)
  })

  // V8 grows a heap's young generation to 2 × 16 MiB (2 × 64 on Node 24) under a stream of writes;
  // the daemon holds it at the size it has (YoungGeneration.ts), and starts the search thread's at
  // its cap. Checked after the index has outgrown the main thread and moved to its worker, and
  // after writes that would have grown both.
  it("a daemon's heaps keep their young generations held through the index's move to its worker", async () => {
    const writing = await startDaemon({ cli: { node: productNode, file: product.cli } })
    const client = await connectClient("ws", writing.url)
    try {
      const batchedAtStart =
        process.platform === "linux"
          ? await waitFor(
              "Node's own threads under SCHED_BATCH",
              async () => {
                const batched = threadsUnder(writing.pid, schedBatch)
                return batched.length >= 4 ? batched : undefined
              },
              10_000,
              50,
            )
          : []
      // Twice mainThreadDocumentsMax search documents (an entity and its 3 observations each).
      const batches = (2 * mainThreadDocumentsMax) / 40
      for (let batch = 0; batch < batches; batch++) {
        const entities = Array.from({ length: 10 }, (_, index) => ({
          name: `entity ${batch}-${index}`,
          entityType: "probe",
          observations: [0, 1, 2].map((observation) => `observation ${observation} of entity ${batch}-${index}`),
        }))
        const written = await call(client, "create_entities", { entities })
        assert.isFalse(written.isError, written.text)
      }
      const line = await waitFor(
        "the index on its worker, with every document",
        async () => {
          const health = await runProduct(["health", "--data-dir", writing.dataDir])
          const found = health.stdout.split("\n").find((text) => text.includes("search index:")) ?? ""
          return found.includes(`on a worker thread, ${2 * mainThreadDocumentsMax} document`) ? found : undefined
        },
        60_000,
        500,
      )
      const young = [...line.matchAll(/\(young generation (\d+\.\d) MiB\)/g)].map((match) => Number(match[1]))
      assert.lengthOf(young, 2, line)
      const [searchThread, mainThread] = young as [number, number]
      assert.isAtMost(mainThread, 16, `the main thread's young generation grew: ${line}`)
      // It starts at its cap (V8's initial 2 MiB otherwise, which the hold would keep), and V8 keeps
      // it there; Node 24's lends a young generation pages beyond its size while the old generation
      // is being marked (9.3 MiB was read here), handed back at the next full collection.
      assert.isAtLeast(searchThread, searchThreadYoungGenerationMb, `the search thread's, below its cap: ${line}`)
      // Node's own threads (V8's helpers) from the start, and the search thread once it runs, do not
      // take the CPU from the main thread when they wake (ThreadPolicy.ts); the main thread and the
      // WAL writer keep the default policy.
      if (process.platform === "linux") {
        const batched = threadsUnder(writing.pid, schedBatch)
        assert.notInclude(batched, writing.pid, "the main thread")
        assert.isAtLeast(batched.filter((tid) => !batchedAtStart.includes(tid)).length, 1, "the search thread")
        assert.isAtLeast(threadsUnder(writing.pid, 0).filter((tid) => tid !== writing.pid).length, 1, "the WAL writer")
      }
    } finally {
      await client.close()
      await writing.stop()
    }
  })

  it("keeps the search vectors an older version kept by document id: moved under their documents' keys at the next start", async () => {
    const first = await startDaemon({ cli: { node: productNode, file: product.cli } })
    const { dataDir } = first
    const indexed = async (documents: number) => {
      const pattern = new RegExp(
        `search index: warm, [^,]+, ${documents} document\\(s\\) \\(full text [\\d.]+ MiB\\), ${documents} vector\\(s\\)`,
      )
      await waitFor(
        `the index warm with ${documents} vectors`,
        async () => pattern.test((await runProduct(["health", "--data-dir", dataDir])).stdout) || undefined,
        60_000,
        200,
      )
    }
    const client = await connectClient("ws", first.url)
    try {
      const entities = ["espresso machine", "garden hose", "violin bow"].map((name) => ({
        name,
        entityType: "thing",
        observations: [`the ${name} was bought in March`, `the ${name} needs care`],
      }))
      const written = await call(client, "create_entities", { entities })
      assert.isFalse(written.isError, written.text)
      await indexed(9)
    } finally {
      await client.close()
      await first.stop()
    }
    // Rewritten as an older version kept it: each vector under its document's id, its codes
    // negated (a vector the daemon would not make again), so what is found after is what moved.
    const path = join(dataDir, "search", "lmdb")
    const env = open({ path, maxDbs: 6, compression: false })
    const documents = env.openDB<{ id: string }, string>(keyedDatabase("documents", "json"))
    const byKey = env.openDB<Uint8Array, string>(keyedDatabase("document-vectors", "binary"))
    const byId = env.openDB<Uint8Array, string>(keyedDatabase("vectors", "binary"))
    const older = new Map<string, Buffer>()
    for (const { key, value } of byKey.getRange({})) {
      const bytes = Buffer.from(value)
      // A tag byte, the 14-byte hash, a float32 peak, then a signed byte a dimension.
      for (let at = 19; at < bytes.length; at++) bytes.writeInt8(-Math.max(-127, bytes.readInt8(at)), at)
      older.set(key, bytes)
    }
    assert.strictEqual(older.size, 9)
    await env.transaction(() => {
      for (const [key, bytes] of older) void byId.put(documents.get(key)!.id, bytes)
      void byKey.clearAsync()
    })
    await env.close()

    const second = await startDaemon({ dataDir, cli: { node: productNode, file: product.cli } })
    try {
      await indexed(9)
    } finally {
      await second.stop()
    }
    const after = open({ path, maxDbs: 6, compression: false, readOnly: true })
    try {
      const moved = new Map(
        [...after.openDB<Uint8Array, string>(keyedDatabase("document-vectors", "binary")).getRange({})].map(
          ({ key, value }) => [key, Buffer.from(value)],
        ),
      )
      assert.deepStrictEqual(moved, older, "each vector under its document's key, as it was")
      assert.deepStrictEqual([...after.openDB(keyedDatabase("vectors", "binary")).getKeys()], [], "none by id")
    } finally {
      await after.close()
    }
  })

  it("answers every tool of every toolset through the stdio shim", async () => {
    const client = await shimClient(daemon.dataDir, daemon.port)
    try {
      await callEveryTool(client)
    } finally {
      await client.close()
    }
  })

  it("answers every request of an SSE client that stopped reading its stream, in order, once it reads again", async () => {
    // Each read_graph answer is larger than what the stream may hold before requests wait
    // (SseTransport.ts), so most of the 40 are held until the client reads.
    const { request } = await import("node:http")
    const headers = authHeaders(daemon.dataDir)
    const stream = await new Promise<import("node:http").IncomingMessage>((resolve, reject) =>
      request({ host: daemon.host, port: daemon.port, path: "/sse", headers }, resolve).on("error", reject).end(),
    )
    try {
      const answers: Array<{ id: number; result?: CallToolResult }> = []
      let endpoint: string | undefined
      onSseEvents(stream, (event, data) => {
        if (event === "endpoint") endpoint = data
        else answers.push(JSON.parse(data))
      })
      await waitFor("the SSE endpoint", () => endpoint, 10_000)
      const post = (message: object) =>
        new Promise<number>((resolve, reject) =>
          request(
            {
              host: daemon.host,
              port: daemon.port,
              path: endpoint,
              method: "POST",
              headers: { ...headers, "content-type": "application/json" },
            },
            (res) => res.resume().on("end", () => resolve(res.statusCode!)),
          )
            .on("error", reject)
            .end(JSON.stringify({ jsonrpc: "2.0", ...message })),
        )
      const clientInfo = { name: "shipped-sse-unread", version: "1" }
      assert.strictEqual(
        await post({
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2024-11-05", capabilities: {}, clientInfo },
        }),
        202,
      )
      assert.strictEqual(await post({ method: "notifications/initialized" }), 202)
      const entities = Array.from({ length: 100 }, (_, i) => ({
        name: `unread-sse-${i}`,
        entityType: "bench",
        observations: [`${"an observation long enough to make the graph large ".repeat(60)}${i}`],
      }))
      assert.strictEqual(
        await post({ id: 2, method: "tools/call", params: { name: "create_entities", arguments: { entities } } }),
        202,
      )
      await waitFor("the write's answer", () => answers.find((answer) => answer.id === 2), 30_000)
      stream.pause()
      const ids = Array.from({ length: 40 }, (_, i) => 100 + i)
      for (const id of ids)
        assert.strictEqual(await post({ id, method: "tools/call", params: { name: "read_graph", arguments: {} } }), 202)
      await new Promise((resolve) => setTimeout(resolve, 500))
      stream.resume()
      await waitFor(
        "every read_graph answered",
        () => (answers.filter((answer) => answer.id >= 100).length === ids.length ? true : undefined),
        60_000,
      )
      const graphs = answers.filter((answer) => answer.id >= 100)
      assert.deepStrictEqual(
        graphs.map((answer) => answer.id),
        ids,
      )
      for (const graph of graphs) {
        assert.notStrictEqual(graph.result?.isError, true)
        assert.include((graph.result!.content[0] as { text: string }).text, "unread-sse-99")
      }
    } finally {
      stream.destroy()
    }
  })

  it.each<NetworkTransport>(["streamable-http", "sse", "ws"])(
    "answers over %s, editor tools included",
    async (transport) => {
      const client = await connectClient(transport, daemon.url)
      const written = await call(client, "add_sticky_note", { text: `over ${transport}` })
      assert.isFalse(written.isError, written.text)
      const listed = await call(client, "list_sticky_notes", { query: transport })
      assert.include(listed.text, `over ${transport}`)
      const skeleton = await call(client, "read_file_skeleton", { path: join(workspace, "tool.py") })
      assert.isFalse(skeleton.isError, skeleton.text)
      assert.include(skeleton.text, "Greeter")
      const buffer = await call(client, "nvim_get_active_buffer", {})
      assert.isFalse(buffer.isError, buffer.text)
      await client.close()
    },
  )

  it("with source maps on, a stack trace names the sources, and serve --stdio still answers", async () => {
    // A stack taken inside the bundle: where it writes its version to stdout.
    const probe = join(tempDir("mnemos-shipped-stack-"), "stack.cjs")
    writeFileSync(
      probe,
      `const write = process.stdout.write.bind(process.stdout)
process.stdout.write = (...args) => { process.stderr.write(new Error("probe").stack + "\\n"); return write(...args) }`,
    )
    const withMaps = await runProductWith(["--version"], "", {
      NODE_OPTIONS: `--enable-source-maps --require ${probe}`,
    })
    assert.strictEqual(withMaps.code, 0, withMaps.stderr)
    assert.include(withMaps.stdout, product.version)
    assert.match(withMaps.stderr, /src\/cli\/\w+\.ts:\d+:\d+/, "no frame of the sources")
    assert.notInclude(withMaps.stderr, "cli.cjs", "a frame left in the bundle")
    const without = await runProductWith(["--version"], "", { NODE_OPTIONS: `--require ${probe}` })
    assert.include(without.stderr, "cli.cjs")
    const dataDir = tempDir("mnemos-shipped-maps-")
    const served = await runProductWith(
      ["serve", "--stdio", "--data-dir", dataDir],
      initialize + initialized + noteCall(2, "with source maps"),
      { NODE_OPTIONS: "--enable-source-maps" },
    )
    assert.strictEqual(served.code, 0, served.stderr)
    const answer = answersOf(served.stdout).find((message) => message.id === 2)
    assert.isDefined(answer?.result, `no answer to the write: ${served.stdout}`)
    assert.notStrictEqual(answer!.result!.isError, true, JSON.stringify(answer))
  })

  it("serve --stdio answers every request read before stdin ends, then exits 0", async () => {
    const dataDir = tempDir("mnemos-shipped-stdio-")
    const ended = await runProduct(
      ["serve", "--stdio", "--data-dir", dataDir],
      initialize + initialized + noteCall(2, "piped then closed"),
    )
    assert.strictEqual(ended.code, 0, ended.stderr)
    const answer = answersOf(ended.stdout).find((message) => message.id === 2)
    assert.isDefined(answer, `no answer to the write: ${ended.stdout}`)
    assert.notStrictEqual(answer!.result?.isError, true, JSON.stringify(answer))
    const reread = await runProduct(
      ["serve", "--stdio", "--data-dir", dataDir],
      initialize +
        initialized +
        line({ id: 3, method: "tools/call", params: { name: "list_sticky_notes", arguments: {} } }),
    )
    assert.include(reread.stdout, "piped then closed")
  })

  it("serve --stdio whose client is killed with requests in flight runs them, then frees its data directory at once", async () => {
    const dataDir = tempDir("mnemos-shipped-killed-client-")
    const notes = Array.from({ length: 20 }, (_, i) => `written by a client killed before its answer ${i}`)
    // The client: starts the product, sends its requests, and is killed (SIGKILL) once the first
    // answer comes, so that stdin and stdout both close with requests unanswered.
    const clientScript = `
      const { spawn } = require("node:child_process")
      const child = spawn(process.argv[1], process.argv.slice(2), { stdio: ["pipe", "pipe", "ignore"] })
      process.stdout.write(child.pid + "\\n")
      child.stdout.once("data", () => process.kill(process.pid, "SIGKILL"))
      child.stdin.write(process.env.REQUESTS)
    `
    const requests = initialize + initialized + notes.map((text, i) => noteCall(10 + i, text)).join("")
    const client = spawnSync(
      productNode,
      ["-e", clientScript, productNode, product.cli, "serve", "--stdio", "--data-dir", dataDir],
      {
        cwd: workspace,
        env: { ...productEnv(), REQUESTS: requests },
        encoding: "utf8",
        timeout: 60_000,
      },
    )
    assert.strictEqual(client.signal, "SIGKILL", client.stderr)
    const pid = Number(client.stdout.trim())
    assert.isTrue(Number.isInteger(pid) && pid > 0, client.stdout)
    // Well inside the minute it would wait to deliver answers (StdioLines.ts `inputEndGraceMs`).
    await waitFor(
      `serve --stdio (pid ${pid}) to stop once its killed client's requests have run`,
      () => (isAlive(pid) ? undefined : true),
      30_000,
    )
    const reread = await runProduct(
      ["serve", "--stdio", "--data-dir", dataDir],
      initialize +
        initialized +
        line({ id: 3, method: "tools/call", params: { name: "list_sticky_notes", arguments: {} } }),
    )
    assert.strictEqual(reread.code, 0, reread.stderr)
    for (const note of notes) assert.include(reread.stdout, note)
  })

  it("answers a read_graph longer than a piece of its text as one line: the official text beside its structured content", async () => {
    // 60 entities of three 500-character observations (pairs, quotes, backslashes): a text of about
    // 150 KB, written in pieces (transports/JsonPieces.ts) by serve --stdio and by the shim.
    const entities = Array.from({ length: 60 }, (_, i) => ({
      name: `large-answer-${i}`,
      entityType: "bench",
      observations: [0, 1, 2].map((o) => `${'😀 "quoted" \\ '.repeat(40)}${i}.${o}`),
    }))
    const check = async (client: Client) => {
      const created = await call(client, "create_entities", { entities })
      assert.isFalse(created.isError, created.text)
      const result = (await client.callTool({ name: "read_graph", arguments: {} })) as CallToolResult
      const text = (result.content[0] as { text: string }).text
      assert.isAbove(text.length, 2 * 64 * 1024)
      assert.strictEqual(text, JSON.stringify(result.structuredContent, null, 2))
      const read = (result.structuredContent as { entities: Array<{ name: string; observations: Array<string> }> })
        .entities
      for (const entity of entities)
        assert.deepStrictEqual(read.find((found) => found.name === entity.name)?.observations, entity.observations)
    }
    const served = new Client({ name: "shipped-large", version: "1.0.0" })
    await served.connect(
      new StdioClientTransport({
        command: productNode,
        args: [product.cli, "serve", "--stdio", "--data-dir", tempDir("mnemos-shipped-large-")],
        cwd: workspace,
        env: productEnv() as Record<string, string>,
        stderr: "pipe",
      }),
    )
    try {
      await check(served)
    } finally {
      await served.close()
    }
    const shim = await shimClient(daemon.dataDir, daemon.port)
    try {
      await check(shim)
    } finally {
      await shim.close()
    }
  })

  it("lets go of the graph store file's pages a read_graph mapped once the store idles", async () => {
    // 2,000 entities of two 1,000-character observations: a graph store file of about 5 MiB,
    // mapped whole by the read and let go of (the environment reopened) about a second after it.
    const dataDir = tempDir("mnemos-shipped-pages-")
    const transport = new StdioClientTransport({
      command: productNode,
      args: [product.cli, "serve", "--stdio", "--data-dir", dataDir],
      cwd: workspace,
      env: productEnv() as Record<string, string>,
      stderr: "pipe",
    })
    const client = new Client({ name: "shipped-pages", version: "1.0.0" })
    await client.connect(transport)
    try {
      for (let start = 0; start < 2_000; start += 200) {
        const entities = Array.from({ length: 200 }, (_, i) => ({
          name: `paged-${start + i}`,
          entityType: "bench",
          observations: [0, 1].map((o) => `${o} ${"observed ".repeat(110)} ${start + i}`),
        }))
        const created = await call(client, "create_entities", { entities })
        assert.isFalse(created.isError, created.text)
      }
      const file = join(dataDir, "stores", "graph", "lmdb", "data.mdb")
      const resident = () => {
        let bytes = 0
        let inFile = false
        for (const line of readFileSync(`/proc/${transport.pid}/smaps`, "utf8").split("\n")) {
          if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inFile = line.endsWith(` ${file}`)
          else if (inFile && line.startsWith("Rss:")) bytes += Number(line.split(/\s+/)[1]) * 1024
        }
        return bytes
      }
      const graph = (await client.callTool({ name: "read_graph", arguments: {} })) as CallToolResult
      assert.strictEqual((graph.structuredContent as { entities: Array<unknown> }).entities.length, 2_000)
      assert.isAbove(resident(), 3 * 1024 * 1024)
      await waitFor("the graph store's pages let go", () => (resident() < 1024 * 1024 ? true : undefined), 15_000)
      // What was let go reads back whole.
      const again = (await client.callTool({ name: "read_graph", arguments: {} })) as CallToolResult
      assert.deepStrictEqual(again.structuredContent, graph.structuredContent)
    } finally {
      await client.close()
    }
  })

  it("serve re-executes itself with glibc's allocator settings where Node can, and keeps a user's own", async () => {
    const hasExecve = spawnSync(productNode, ["-p", "typeof process.execve"], { encoding: "utf8" }).stdout.trim()
    const plain = Object.fromEntries(
      Object.entries(productEnv()).filter(([name]) => !(name in allocatorEnv) && name !== "GLIBC_TUNABLES"),
    )
    /**
     * The environment `serve --stdio` runs with once it answered `initialize`, read from the pid its
     * client started, and its `--v8-pool-size` flags.
     */
    const servedEnvironment = async (env: NodeJS.ProcessEnv) => {
      const child = spawn(
        productNode,
        [product.cli, "serve", "--stdio", "--data-dir", tempDir("mnemos-shipped-alloc-")],
        {
          cwd: workspace,
          env,
        },
      )
      started.push(child)
      let stdout = ""
      child.stdout.on("data", (chunk) => (stdout += chunk))
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.stdin.write(initialize)
      await waitFor("the answer to initialize", () => (/"id":1[,}]/.test(stdout) ? true : undefined), 30_000)
      const environment = readFileSync(`/proc/${child.pid}/environ`, "utf8").split("\0")
      const flags = helperThreadFlags(child.pid!)
      child.stdin.end()
      await exited
      return Object.assign(environment, { flags })
    }
    const settings = Object.entries(allocatorEnv).map(([name, value]) => `${name}=${value}`)
    const served = await servedEnvironment(plain)
    // Node 22.15+ and 24 have process.execve; Node 20 has not, and keeps glibc's defaults (docs/operations.md).
    if (hasExecve === "function") {
      for (const setting of settings) assert.include(served, setting)
      assert.deepStrictEqual(served.flags, expectedHelperThreadFlags)
    } else {
      for (const setting of settings) assert.notInclude(served, setting)
      assert.deepStrictEqual(served.flags, [])
    }
    const own = await servedEnvironment({ ...plain, MALLOC_TRIM_THRESHOLD_: "131072" })
    assert.include(own, "MALLOC_TRIM_THRESHOLD_=131072")
    assert.notInclude(own, settings[0])
  })

  it("starts from a code cache made for this Node: the build's, or one of its own written once", async () => {
    const cacheHome = tempDir("mnemos-shipped-cache-")
    const dataDir = tempDir("mnemos-shipped-cached-")
    const serve = async (text: string, env: NodeJS.ProcessEnv = {}) => {
      const ended = await runProductWith(
        ["serve", "--stdio", "--data-dir", dataDir],
        initialize + initialized + noteCall(2, text),
        { XDG_CACHE_HOME: cacheHome, ...env },
      )
      assert.strictEqual(ended.code, 0, ended.stderr)
      assert.include(JSON.stringify(answersOf(ended.stdout).find((message) => message.id === 2)), text)
    }
    const bundle = join(dirname(product.cli), "bundle", "cli.cjs")
    const madeFor = createHash("sha256")
      .update(readFileSync(bundle))
      .update(`\0${productNodeVersion}\0${process.arch}`)
      .digest()
    const buildsIsThisNodes = readFileSync(`${bundle}.cache`).subarray(0, madeFor.length).equals(madeFor)
    const own = join(cacheHome, "mnemos", "code-cache", `serve-${productNodeVersion}-${process.arch}.cache`)
    await serve("a first start")
    if (buildsIsThisNodes) {
      assert.isFalse(existsSync(own), "wrote a cache of its own beside the build's, made for this Node")
      // One of its own left by an earlier start (here one V8 refuses): the build's still serves
      // first, so it is neither compiled around nor written again.
      mkdirSync(dirname(own), { recursive: true })
      const planted = Buffer.concat([madeFor, Buffer.alloc(4096, 7)])
      writeFileSync(own, planted)
      await serve("a start beside a cache of its own")
      assert.isTrue(readFileSync(own).equals(planted), "the user's cache was offered before the build's")
      // Under other V8 flags V8 refuses the build's: a cache of its own is written and, from the
      // next start on, offered first (and taken: not written again).
      rmSync(own)
      const otherFlags = { NODE_OPTIONS: "--max-old-space-size=4096" }
      await serve("a start under other V8 flags", otherFlags)
      assert.isTrue(existsSync(own), "wrote no cache of its own where V8 refused the build's")
      assert.isTrue(existsSync(`${own}.build-refused`), "did not record that V8 refused the build's")
      const written = statSync(own)
      await serve("a second start under them", otherFlags)
      const after = statSync(own)
      assert.deepStrictEqual([after.ino, after.mtimeMs], [written.ino, written.mtimeMs], "its own cache was not taken")
      return
    }
    assert.isTrue(existsSync(own), "wrote no code cache for a Node the build's was not made for")
    // Written before the first idle collection, while the daemon runs: on Node 22 and 24 that
    // collection drops the bytecode of what is not running, and a cache written after it (at exit)
    // held little more than the bundle's top level (CodeCacheWriter.ts).
    rmSync(own)
    const idling = spawn(productNode, [product.cli, "serve", "--stdio", "--data-dir", dataDir], {
      cwd: workspace,
      env: { ...productEnv(), XDG_CACHE_HOME: cacheHome },
    })
    started.push(idling)
    const idled = new Promise((resolve) => idling.once("exit", resolve))
    idling.stdin.write(initialize + initialized + noteCall(2, "then idle"))
    await waitFor("the cache written while the daemon idles", () => (existsSync(own) ? true : undefined), 30_000)
    assert.isNull(idling.exitCode, "the cache was written only as the daemon exited")
    idling.stdin.end()
    await idled
    const written = statSync(own)
    await serve("a second start")
    const after = statSync(own)
    // Rewritten (a new file renamed over it) only when V8 refused it.
    assert.deepStrictEqual([after.ino, after.mtimeMs], [written.ino, written.mtimeMs], "V8 refused the cache it wrote")
    // A thin one (here the bundle's top level alone, which V8 takes) is written again by a start
    // that ran more: nothing else would replace it.
    const thin = join(cacheHome, "top-level.cache")
    execFileSync(productNode, [
      "-e",
      `const fs = require("node:fs"), vm = require("node:vm")
       const source = fs.readFileSync(${JSON.stringify(bundle)}).toString("latin1")
       const data = new vm.Script(source).createCachedData()
       fs.writeFileSync(${JSON.stringify(thin)}, Buffer.concat([Buffer.from(${JSON.stringify(madeFor.toString("hex"))}, "hex"), data]))`,
    ])
    writeFileSync(own, readFileSync(thin))
    await serve("a start from a thin cache")
    assert.isAbove(statSync(own).size, statSync(thin).size, "a thin cache was not written again")
  })

  it("editor tools against a Neovim that has quit answer NOT_FOUND, not an internal error", async () => {
    const stale = join(tempDir("mnemos-shipped-stale-"), "nvim.sock")
    // A socket file whose listener was killed, as a Neovim that was killed leaves it.
    spawnSync(process.execPath, [
      "-e",
      `require("node:net").createServer().listen(${JSON.stringify(stale)}, () => process.kill(process.pid, "SIGKILL"))`,
    ])
    const ended = await runProductWith(
      ["serve", "--stdio", "--data-dir", tempDir("mnemos-shipped-stale-data-")],
      initialize +
        initialized +
        line({ id: 2, method: "tools/call", params: { name: "nvim_get_cursor", arguments: {} } }),
      { NVIM: stale },
    )
    const answer = answersOf(ended.stdout).find((message) => message.id === 2)
    assert.isTrue(answer?.result?.isError, JSON.stringify(answer))
    const text =
      answer!.result!.content[0]!.type === "text" ? (answer!.result!.content[0] as { text: string }).text : ""
    assert.include(text, "NOT_FOUND")
  })

  it("model: list, an offline pull, a pull of bytes that are not the pinned ones, use and remove", async () => {
    const dataDir = tempDir("mnemos-shipped-model-")
    const listed = await runProduct(["model", "list", "--data-dir", dataDir])
    assert.strictEqual(listed.code, 0, listed.stderr)
    assert.match(listed.stdout, /\* builtin/)
    assert.match(listed.stdout, new RegExp(`${defaultModelName} +not pulled`))

    const port = await closedPort()
    const offline = await runProduct(["model", "pull", "--data-dir", dataDir, "--hub", `http://127.0.0.1:${port}`])
    assert.strictEqual(offline.code, 1)
    assert.include(offline.stderr, "ECONNREFUSED")
    assert.include(offline.stderr, "mnemos serve --model DIR")
    const pinned = builtinCatalogue[defaultModelName]!
    assert.include(offline.stderr, fileUrl(`http://127.0.0.1:${port}`, pinned, pinned.files[0]!))

    // The real pins, and a hub that serves the right sizes of the wrong bytes.
    const hub = await startHub(
      new Map(
        pinned.files.map((file) => [new URL(fileUrl("http://x", pinned, file)).pathname, Buffer.alloc(file.bytes, 7)]),
      ),
    )
    try {
      const refused = await runProduct(["model", "pull", "--data-dir", dataDir, "--hub", hub.url])
      assert.strictEqual(refused.code, 1)
      assert.include(refused.stderr, "downloading model.onnx (90.4 MB)")
      assert.include(refused.stderr, "onnx/model.onnx has SHA-256")
      assert.include(refused.stderr, "refused and deleted")
      assert.isFalse(existsSync(modelDirOf(dataDir, defaultModelName)))
    } finally {
      await hub.close()
    }

    const tiny = tinyModel()
    const tinyHub = await startHub(tiny.files)
    try {
      await Effect.runPromise(
        pullModel({ dataDir, name: "tiny", hub: tinyHub.url, catalogue: tiny.catalogue, progress: () => undefined }),
      )
    } finally {
      await tinyHub.close()
    }
    const used = await runProduct(["model", "use", "tiny", "--data-dir", dataDir])
    assert.strictEqual(used.code, 0, used.stderr)
    assert.match((await runProduct(["model", "list", "--data-dir", dataDir])).stdout, /\* tiny +pulled/)
    const inUse = await runProduct(["model", "remove", "tiny", "--data-dir", dataDir])
    assert.strictEqual(inUse.code, 1)
    assert.include(inUse.stderr, "mnemos model use builtin")
    assert.strictEqual((await runProduct(["model", "use", "builtin", "--data-dir", dataDir])).code, 0)
    const removed = await runProduct(["model", "remove", "tiny", "--data-dir", dataDir])
    assert.strictEqual(removed.code, 0, removed.stderr)
    assert.isFalse(existsSync(modelDirOf(dataDir, "tiny")))
  })

  it("the shim answers every request read before stdin ends, then exits 0", async () => {
    const dataDir = tempDir("mnemos-shipped-shim-")
    mkdirSync(dataDir, { recursive: true })
    const port = await freePort()
    const ended = await runProduct(
      ["mcp", "--data-dir", dataDir, "--port", String(port)],
      initialize + initialized + noteCall(2, "shim then closed"),
    )
    assert.strictEqual(ended.code, 0, ended.stderr)
    const answer = answersOf(ended.stdout).find((message) => message.id === 2)
    assert.isDefined(answer, `no answer to the write: ${ended.stdout}\n${ended.stderr}`)
    assert.notStrictEqual(answer!.result?.isError, true, JSON.stringify(answer))
    const started = JSON.parse(readFileSync(join(dataDir, "daemon.json"), "utf8")) as { pid: number; port: number }
    assert.strictEqual(started.port, port)
    // It runs with glibc's allocator settings (src/runtime/AllocatorEnv.ts), which glibc reads only at start.
    const environment = readFileSync(`/proc/${started.pid}/environ`, "utf8").split("\0")
    for (const [name, value] of Object.entries(allocatorEnv)) assert.include(environment, `${name}=${value}`)
    // And with V8's helper threads for this machine, which Node sets only at start.
    assert.deepStrictEqual(helperThreadFlags(started.pid), expectedHelperThreadFlags)
    // The daemon the shim started stops on SIGTERM, and is gone before its directory is removed.
    process.kill(started.pid, "SIGTERM")
    await waitFor(`daemon ${started.pid} to exit`, () => (isAlive(started.pid) ? undefined : true), 15_000)
  })
})
