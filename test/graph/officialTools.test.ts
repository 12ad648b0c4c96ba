/**
 * mnemos's tool definitions must be what the official server's `tools/list` returns, byte for
 * byte. The fixture test/fixtures/official-tools-list.json is the raw `result` of `tools/list`
 * from the official server (key order as on the wire; the SDK client's parsed result reorders
 * keys). The live test re-asks the installed official server, so a dependency update that
 * changes the tools fails here; run with UPDATE_OFFICIAL_FIXTURES=1 to rewrite the fixture.
 */
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { describe, expect, it } from "vitest"
import {
  officialToolDefinition,
  officialToolDefinitions,
  officialToolNames,
} from "../../src/tools/officialToolDefinitions.ts"

const fixturePath = join(import.meta.dirname, "..", "fixtures", "official-tools-list.json")
const officialServerPath = join(
  import.meta.dirname,
  "..",
  "..",
  "node_modules",
  "@modelcontextprotocol",
  "server-memory",
  "dist",
  "index.js",
)

const readFixture = (): { readonly tools: ReadonlyArray<unknown> } => JSON.parse(readFileSync(fixturePath, "utf8"))

/** Runs the official server over stdio and returns the raw JSON `result` of `tools/list`. */
const rawToolsList = (): Promise<string> =>
  new Promise((resolve, reject) => {
    const directory = mkdtempSync(join(tmpdir(), "mnemos-official-"))
    const memoryFile = join(directory, "memory.jsonl")
    const server = spawn(process.execPath, [officialServerPath], {
      env: { ...process.env, MEMORY_FILE_PATH: memoryFile },
      stdio: ["pipe", "pipe", "ignore"],
    })
    const send = (message: object) => server.stdin.write(`${JSON.stringify(message)}\n`)
    let buffered = ""
    server.on("error", reject)
    server.stdout.setEncoding("utf8")
    server.stdout.on("data", (chunk: string) => {
      buffered += chunk
      for (let newline = buffered.indexOf("\n"); newline >= 0; newline = buffered.indexOf("\n")) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        const message: { readonly id?: unknown; readonly result?: unknown } = JSON.parse(line)
        if (message.id === 1) {
          send({ jsonrpc: "2.0", method: "notifications/initialized" })
          send({ jsonrpc: "2.0", id: 2, method: "tools/list" })
        } else if (message.id === 2) {
          server.kill()
          rmSync(directory, { recursive: true, force: true })
          // Re-serialize only the `result` member, keeping the wire's key order.
          resolve(JSON.stringify(message.result))
        }
      }
    })
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "mnemos-test", version: "0" } },
    })
  })

describe("official tool definitions", () => {
  it("deep-equal the captured official tools/list, in order", () => {
    expect(officialToolDefinitions).toEqual(readFixture().tools)
    expect(officialToolDefinitions.map((definition) => definition.name)).toEqual([...officialToolNames])
  })

  it("serialize to the same JSON text as the fixture, key order included", () => {
    expect(JSON.stringify({ tools: officialToolDefinitions }, null, 2)).toBe(JSON.stringify(readFixture(), null, 2))
  })

  it("look up by name", () => {
    expect(officialToolDefinition("search_nodes").annotations.readOnlyHint).toBe(true)
    expect(officialToolDefinition("delete_entities").annotations.destructiveHint).toBe(true)
  })

  it("match what the installed official server lists right now", async () => {
    const live = await rawToolsList()
    if (process.env.UPDATE_OFFICIAL_FIXTURES === "1") {
      writeFileSync(fixturePath, `${JSON.stringify(JSON.parse(live), null, 2)}\n`)
    }
    expect(live).toBe(JSON.stringify(readFixture()))
  })

  it("are what the SDK client sees from the official server", async () => {
    const directory = mkdtempSync(join(tmpdir(), "mnemos-official-"))
    const memoryFile = join(directory, "memory.jsonl")
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [officialServerPath],
      env: { ...(process.env as Record<string, string>), MEMORY_FILE_PATH: memoryFile },
      stderr: "ignore",
    })
    const client = new Client({ name: "mnemos-test", version: "0" })
    await client.connect(transport)
    try {
      const listed = await client.listTools()
      expect(listed.tools).toEqual(officialToolDefinitions)
    } finally {
      await client.close()
      rmSync(directory, { recursive: true, force: true })
    }
  })
})

describe("every tool in the catalogue", () => {
  it("has an object input schema (MCP clients refuse tools/list otherwise)", async () => {
    const { catalogue } = await import("../../src/tools/Catalogue.ts")
    for (const tool of catalogue) expect(tool.definition.inputSchema.type, tool.definition.name).toBe("object")
  })
})
