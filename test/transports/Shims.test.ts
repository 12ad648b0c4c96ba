/**
 * The `mnemos mcp` shim against a real daemon: several shims share one daemon (started by the
 * shims themselves), and a daemon SIGKILLed with writes in flight is restarted by the shim with
 * every write answered exactly once and applied exactly once.
 */

import { realpathSync } from "node:fs"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, describe, expect, it } from "vitest"
import {
  authHeaders,
  callTool,
  cleanup,
  connectClient,
  connectShim,
  daemonPidOf,
  freePort,
  isAlive,
  type RawShim,
  repoRoot,
  startDaemon,
  startRawShim,
  tempDir,
  waitFor,
} from "./harness.ts"

afterAll(cleanup)

const range = (count: number) => Array.from({ length: count }, (_, index) => index)

describe("mnemos mcp (the stdio shim)", () => {
  it("a client that offers no root gets git context from the directory it started the shim in", async () => {
    const dataDir = tempDir()
    const { client } = await connectShim(dataDir, await freePort())
    const logged = await callTool(client, "log_code_change", { summary: "tightened the retry loop" })
    expect(logged.isError, logged.text).toBe(false)
    const change = (logged.structured as { change: { git?: { root: string }; gitUnavailable?: string } }).change
    expect(change.gitUnavailable).toBeUndefined()
    // The shim runs in the repository's root (connectShim's cwd); the daemon runs elsewhere.
    expect(realpathSync(change.git!.root)).toBe(realpathSync(repoRoot))
  })

  it("its port held by the daemon of another data directory: requests are answered with that error at once, none hangs", async () => {
    const daemon = await startDaemon()
    const elsewhere = tempDir()
    const shim = await startRawShim(elsewhere, daemon.port)
    const errorOf = (answer: JSONRPCMessage | undefined) =>
      (answer as { error?: { message: string } } | undefined)?.error?.message ?? `no error in ${JSON.stringify(answer)}`
    // The handshake itself is answered, with the reason.
    expect(errorOf(shim.answers.get("r1")?.[0])).toContain(
      `port ${daemon.port} serves another data directory (${daemon.dataDir})`,
    )
    const call = await shim.request("tools/call", { name: "read_graph", arguments: {} })
    expect(errorOf(call)).toContain("pass --port to use another")
    await shim.close()
  })

  it("a request reusing the id of one still pending is refused at once; the first is answered and applied once", async () => {
    const shim = await startRawShim(tempDir(), await freePort())
    const addTask = (title: string) =>
      JSON.stringify({
        jsonrpc: "2.0",
        id: "same",
        method: "tools/call",
        params: { name: "add_task", arguments: { title } },
      })
    // One write: the second line is read before any answer to the first can arrive.
    shim.writeRaw(`${addTask("first")}\n${addTask("second")}\n`)
    const answers = await waitFor("two answers to id same", () => {
      const list = shim.answers.get("same") ?? []
      return list.length >= 2 ? list : undefined
    })
    const [refused, applied] = answers as Array<JSONRPCMessage & { error?: { code: number; message: string } }>
    expect(refused?.error?.code).toBe(-32600)
    expect(refused?.error?.message).toContain("still waiting for its answer")
    expect(
      (applied as unknown as { result: { structuredContent: { task: { title: string } } } }).result.structuredContent
        .task.title,
    ).toBe("first")
    const listed = (await shim.request("tools/call", { name: "list_tasks", arguments: {} })) as unknown as {
      result: { structuredContent: { tasks: Array<{ title: string }> } }
    }
    expect(listed.result.structuredContent.tasks.map((task) => task.title)).toEqual(["first"])
    await shim.close()
  })

  it("two shims started at once share one daemon they start themselves; 2 × 10 concurrent create_entities all land", async () => {
    const dataDir = tempDir()
    const port = await freePort()
    const [first, second] = await Promise.all([
      connectShim(dataDir, port, "agent-a"),
      connectShim(dataDir, port, "agent-b"),
    ])
    const results = await Promise.all(
      [first, second].flatMap((shim, shimIndex) =>
        range(10).map((index) =>
          callTool(shim.client, "create_entities", {
            entities: [
              { name: `shim-${shimIndex}-${index}`, entityType: "test", observations: [`from shim ${shimIndex}`] },
            ],
          }),
        ),
      ),
    )
    for (const result of results) expect(result.isError, result.text).toBe(false)
    // Each call created exactly its own entity.
    for (const [position, result] of results.entries())
      expect(result.structured).toEqual({
        entities: [
          {
            name: `shim-${Math.floor(position / 10)}-${position % 10}`,
            entityType: "test",
            observations: [`from shim ${Math.floor(position / 10)}`],
          },
        ],
      })
    // Read through a third, direct connection: the daemon holds all 20.
    const pid = daemonPidOf(dataDir)
    expect(pid).toBeDefined()
    const direct = await connectClient("ws", `http://127.0.0.1:${port}`, { headers: authHeaders(dataDir) })
    const graph = (await callTool(direct, "read_graph", {})).structured as { entities: Array<{ name: string }> }
    expect(graph.entities.map((entity) => entity.name).sort()).toEqual(
      [0, 1].flatMap((shimIndex) => range(10).map((index) => `shim-${shimIndex}-${index}`)).sort(),
    )
  })

  it("the daemon SIGKILLed twice with writes in flight: every write answered once, none failed, each applied once", async () => {
    const dataDir = tempDir()
    const port = await freePort()
    const shim = await startRawShim(dataDir, port)
    const created = await shim.request("tools/call", {
      name: "create_entities",
      arguments: { entities: [{ name: "target", entityType: "test", observations: [] }] },
    })
    expect("result" in created).toBe(true)

    const writes = 300
    const window = 25
    const killAtAnswers = [60, 180]
    const sentAt: Array<number> = []
    const answeredAt: Array<number> = []
    const kills: Array<{ pid: number; sent: number; answered: number }> = []
    let answered = 0
    let next = 0
    const contentOf = (index: number) => `observation ${index} (kill-9 test)`
    const idOf = (index: number) => `write-${index}`

    const killIfDue = () => {
      const due = killAtAnswers[kills.length]
      if (due === undefined || answered < due) return
      const pid = daemonPidOf(dataDir)
      if (pid === undefined || !isAlive(pid) || kills.some((kill) => kill.pid === pid)) return
      process.kill(pid, "SIGKILL")
      kills.push({ pid, sent: next, answered })
    }
    const sendOne = (shim: RawShim): Promise<void> | undefined => {
      if (next >= writes) return undefined
      const index = next++
      sentAt[index] = Date.now()
      return shim
        .request(
          "tools/call",
          {
            name: "add_observations",
            arguments: { observations: [{ entityName: "target", contents: [contentOf(index)] }] },
          },
          idOf(index),
        )
        .then(() => {
          answeredAt[index] = Date.now()
          answered++
          killIfDue()
          return sendOne(shim)
        })
    }
    await Promise.race([
      Promise.all(range(window).map(() => sendOne(shim))),
      new Promise((_, reject) =>
        setTimeout(
          () => reject(new Error(`only ${answered}/${writes} answered after 90 s; shim log:\n${shim.stderr()}`)),
          90_000,
        ),
      ),
    ])
    expect(kills).toHaveLength(killAtAnswers.length)
    // Writes were in flight at each kill (sent, not yet answered).
    for (const kill of kills) expect(kill.sent - kill.answered).toBeGreaterThan(0)
    // Give a late duplicate the chance to show up before counting answers.
    await new Promise((resolve) => setTimeout(resolve, 500))

    for (const index of range(writes)) {
      const answers = shim.answers.get(idOf(index)) ?? []
      expect(answers, `answers to ${idOf(index)}`).toHaveLength(1)
      const answer = answers[0] as JSONRPCMessage & {
        result?: { isError?: boolean; structuredContent?: unknown }
        error?: unknown
      }
      expect(answer.error, `${idOf(index)} failed`).toBeUndefined()
      expect(answer.result?.isError ?? false).toBe(false)
      // A second application would answer with no added observation: this is the first reply.
      expect(answer.result?.structuredContent).toEqual({
        results: [{ entityName: "target", addedObservations: [contentOf(index)] }],
      })
    }

    const current = daemonPidOf(dataDir)
    expect(current).toBeDefined()
    expect(kills.map((kill) => kill.pid)).not.toContain(current)
    const read = (await shim.request("tools/call", {
      name: "open_nodes",
      arguments: { names: ["target"] },
    })) as unknown as {
      result: { structuredContent: { entities: Array<{ observations: Array<string> }> } }
    }
    const observations = read.result.structuredContent.entities[0]!.observations
    expect(observations).toHaveLength(writes)
    expect([...observations].sort()).toEqual(range(writes).map(contentOf).sort())
    console.log(
      `kill-9: ${writes} writes, window ${window}; kills at ${kills.map((kill) => `${kill.answered} answered / ${kill.sent} sent`).join(", ")}`,
    )
    await shim.close()
  })
})
