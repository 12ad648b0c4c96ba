/**
 * What an agent sees: the engineering tools in `tools/list` (annotations, descriptions an agent
 * can choose by), `--toolsets` narrowing `tools/list` and the prompts of a real `mnemos serve
 * --stdio` process, and the `archive_routine` prompt filled from the project's old session
 * summaries.
 */
import { join } from "node:path"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { afterAll, describe, expect, it } from "vitest"
import { catalogue, defaultToolsets, promptsFor, selectTools, toolsets } from "../../src/tools/Catalogue.ts"
import { engineeringTools } from "../../src/tools/EngineeringTools.ts"
import { openEngine, removeTempDirs, tempDir } from "./harness.ts"

afterAll(removeTempDirs)

const repoRoot = join(import.meta.dirname, "..", "..")
const engineeringToolsets = ["tasks", "decisions", "context", "engineering", "gates", "audit"]

/** Starts `mnemos serve --stdio` with `args` and connects a client (closed by the caller). */
const serve = async (...args: Array<string>) => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", join(repoRoot, "src", "cli.ts"), "serve", "--stdio", "--data-dir", tempDir(), ...args],
    cwd: repoRoot,
    stderr: "pipe",
  })
  const client = new Client({ name: "toolsets-test", version: "0" })
  await client.connect(transport)
  return client
}

describe("tool definitions", () => {
  it("every engineering tool is in the catalogue once, in an engineering toolset, with the envelope error format", () => {
    const names = engineeringTools.map((tool) => tool.definition.name)
    expect(new Set(names).size).toBe(names.length)
    for (const tool of engineeringTools) {
      expect(engineeringToolsets).toContain(tool.toolset)
      expect(tool.errorFormat).toBe("envelope")
      expect(catalogue.filter((entry) => entry.definition.name === tool.definition.name)).toHaveLength(1)
    }
    expect(names).toEqual(
      expect.arrayContaining([
        "add_task",
        "update_task",
        "complete_task",
        "list_tasks",
        "record_adr",
        "update_adr",
        "list_adrs",
        "add_sticky_note",
        "list_sticky_notes",
        "remove_sticky_note",
        "add_session_summary",
        "add_handoff",
        "acknowledge_handoff",
        "list_handoffs",
        "save_context_workspace",
        "load_context_workspace",
        "pin_file",
        "unpin_file",
        "log_code_change",
        "log_error_fix",
        "log_tech_debt",
        "add_snippet",
        "add_pr_checklist_item",
        "update_pr_checklist_item",
        "register_environment",
        "add_milestone",
        "gate_set",
        "gate_verify",
        "gate_list",
        "query_audit",
      ]),
    )
  })

  it("descriptions are distinct sentences of a useful length; lists are read-only, removals destructive", () => {
    const descriptions = engineeringTools.map((tool) => tool.definition.description)
    expect(new Set(descriptions).size).toBe(descriptions.length)
    for (const tool of engineeringTools) {
      const { name, description, annotations, inputSchema } = tool.definition
      expect(description.length, name).toBeGreaterThanOrEqual(20)
      expect(description.length, name).toBeLessThanOrEqual(300)
      expect(description, name).toMatch(/^[A-Z].*[.)]$/s)
      expect(inputSchema.type, name).toBe("object")
      if (name.startsWith("list_") || name === "query_audit" || name === "gate_list")
        expect(annotations?.readOnlyHint, name).toBe(true)
      if (name.startsWith("remove_") || name.startsWith("unpin_")) expect(annotations?.destructiveHint, name).toBe(true)
    }
  })

  it("every argument is described, in the JSON Schema subset every tool keeps to (plain types, no anyOf)", () => {
    const allowed = new Set(["$schema", "type", "properties", "required", "items", "enum", "minLength", "maxLength"])
    for (const keyword of [
      "minimum",
      "maximum",
      "minItems",
      "maxItems",
      "additionalProperties",
      "description",
      "title",
    ])
      allowed.add(keyword)
    type Node = { readonly [keyword: string]: unknown }
    const unsupported = (node: Node, path: string): Array<string> => [
      ...Object.keys(node)
        .filter((keyword) => !allowed.has(keyword) || (keyword === "additionalProperties" && node[keyword] !== true))
        .map((keyword) => `${path}.${keyword}`),
      ...Object.entries((node.properties ?? {}) as Record<string, Node>).flatMap(([key, child]) =>
        unsupported(child, `${path}.${key}`),
      ),
      ...(node.items !== undefined ? unsupported(node.items as Node, `${path}[]`) : []),
    ]
    const undescribed: Array<string> = []
    const outside: Array<string> = []
    for (const tool of engineeringTools) {
      const schema = tool.definition.inputSchema as Node
      outside.push(
        ...unsupported(schema, tool.definition.name).filter(
          (path) => !path.endsWith(`${tool.definition.name}.additionalProperties`),
        ),
      )
      for (const [key, property] of Object.entries(schema.properties as Record<string, Node>))
        if (typeof property.description !== "string" || property.description === "")
          undescribed.push(`${tool.definition.name}.${key}`)
    }
    expect(outside).toEqual([])
    expect(undescribed).toEqual([])
  })

  it("toolsets select their tools in catalogue order; prompts follow their toolset", () => {
    expect(toolsets).toEqual(expect.arrayContaining(engineeringToolsets))
    expect(defaultToolsets).toEqual(toolsets)
    const gates = selectTools(["gates"])
    expect(gates.tools.map((tool) => tool.definition.name)).toEqual(["gate_set", "gate_verify", "gate_list"])
    expect(selectTools(["gates", "nope"]).unknown).toEqual(["nope"])
    expect(promptsFor(gates.tools)).toEqual([])
    expect(promptsFor(selectTools(["context"]).tools).map((prompt) => prompt.definition.name)).toEqual([
      "archive_routine",
    ])
  })
})

describe("mnemos serve --toolsets (real process)", () => {
  it("offers only the named toolsets, and prompts only with their toolset", async () => {
    const gatesOnly = await serve("--toolsets", "gates")
    try {
      expect((await gatesOnly.listTools()).tools.map((tool) => tool.name)).toEqual([
        "gate_set",
        "gate_verify",
        "gate_list",
      ])
      expect(gatesOnly.getServerCapabilities()?.prompts).toBeUndefined()
      const hidden = await gatesOnly.callTool({ name: "add_task", arguments: { title: "x" } })
      expect(hidden.isError).toBe(true)
    } finally {
      await gatesOnly.close()
    }
    const context = await serve("--toolsets", "context,tasks")
    try {
      const names = (await context.listTools()).tools.map((tool) => tool.name)
      expect(names).toContain("add_task")
      expect(names).toContain("add_handoff")
      expect(names).not.toContain("create_entities")
      expect((await context.listPrompts()).prompts.map((prompt) => prompt.name)).toEqual(["archive_routine"])
    } finally {
      await context.close()
    }
  })

  it("refuses an unknown toolset with a message naming the known ones", async () => {
    const { spawnSync } = await import("node:child_process")
    const result = spawnSync(
      process.execPath,
      [
        "--import",
        "tsx",
        join(repoRoot, "src", "cli.ts"),
        "serve",
        "--stdio",
        "--toolsets",
        "graph,bogus",
        "--data-dir",
        tempDir(),
      ],
      { cwd: repoRoot, encoding: "utf8", input: "" },
    )
    expect(result.status).toBe(1)
    expect(result.stderr).toContain("unknown toolset(s) bogus")
    expect(result.stderr).toContain("gates")
  })
})

describe("archive_routine prompt", () => {
  it("hands the agent the project's old unarchived summaries and the steps to fold them", async () => {
    const engine = await openEngine()
    try {
      const { prompts } = await engine.client.listPrompts()
      expect(prompts.map((prompt) => prompt.name)).toContain("archive_routine")
      const first = (await engine.ok("add_session_summary", { summary: "Built the WAL", next_steps: ["fuzz it"] }))
        .structured.summary
      const second = (await engine.ok("add_session_summary", { summary: "Added checkpoints" })).structured.summary
      const prompt = await engine.client.getPrompt({ name: "archive_routine", arguments: { older_than_days: "0" } })
      const text = (prompt.messages[0]!.content as { text: string }).text
      expect(text).toContain("Built the WAL")
      expect(text).toContain("Next steps: fuzz it")
      expect(text).toContain(JSON.stringify([first.id, second.id]))
      expect(text).toContain("add_milestone")
      expect(text).toContain("archive_session_summaries")

      const milestone = (await engine.ok("add_milestone", { title: "Retro", retrospective: "WAL and checkpoints" }))
        .structured.milestone
      await engine.ok("archive_session_summaries", { ids: [first.id, second.id], milestone_id: milestone.id })
      const after = await engine.client.getPrompt({ name: "archive_routine", arguments: { older_than_days: "0" } })
      expect((after.messages[0]!.content as { text: string }).text).toContain("Nothing to archive")

      const fresh = await engine.client.getPrompt({ name: "archive_routine", arguments: {} })
      expect((fresh.messages[0]!.content as { text: string }).text).toContain("older than 14 days")
      // Arguments it cannot take, a prompt or a resource that does not exist: invalid params (-32602),
      // the caller's to mend, not an internal error (-32603).
      await expect(
        engine.client.getPrompt({ name: "archive_routine", arguments: { older_than_days: "soon" } }),
      ).rejects.toMatchObject({ code: -32602, message: expect.stringMatching(/archive_routine/) })
      await expect(engine.client.getPrompt({ name: "no_such_prompt", arguments: {} })).rejects.toMatchObject({
        code: -32602,
      })
      await expect(engine.client.readResource({ uri: "memory://no-such-resource" })).rejects.toMatchObject({
        code: -32602,
        message: expect.stringMatching(/no-such-resource/),
      })
    } finally {
      await engine.close()
    }
  })
})
