/**
 * A believable memory for the dashboard tests and screenshots, written through MCP like an agent
 * would: a knowledge graph of a small software project (services, modules, files, libraries,
 * people, decisions, bugs), tasks in every column, notes, handoffs, session summaries,
 * conversations and gates. Deterministic: the same seed gives the same memory.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { callTool } from "../transports/harness.ts"

/** A deterministic pseudo-random source. */
const random = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}

const services = ["checkout", "search", "identity", "billing", "notifications", "gateway"]
const libraries = ["effect", "lmdb", "flexsearch", "onnxruntime", "ws", "zod", "pino", "undici", "vitest", "sigma"]
const people = ["ada", "grace", "linus", "margaret", "barbara"]
const concepts = [
  "idempotency",
  "backpressure",
  "group commit",
  "write-ahead log",
  "rate limiting",
  "retries",
  "caching",
  "sharding",
  "observability",
  "tracing",
]
const decisions = [
  "ADR-1 use LMDB for checkpoints",
  "ADR-2 WAL per store",
  "ADR-3 reject writes over 16 MiB",
  "ADR-4 loopback by default",
  "ADR-5 hybrid search",
]
const bugs = [
  "BUG-101 torn tail on power loss",
  "BUG-117 duplicate retries",
  "BUG-121 slow cold start",
  "BUG-130 cookie leak across ports",
  "BUG-142 index lag under load",
  "BUG-150 OOM on import",
]

export interface SeededGraph {
  readonly entities: number
  readonly relations: number
  /** An entity the tests search for and focus. */
  readonly focus: string
}

const send = async (client: Client, tool: string, args: Record<string, unknown>) => {
  const result = await callTool(client, tool, args)
  if (result.isError) throw new Error(`${tool} failed: ${result.text}`)
  return result
}

/** Writes the knowledge graph. */
export const seedGraph = async (client: Client): Promise<SeededGraph> => {
  const next = random(7)
  const pick = <A>(items: ReadonlyArray<A>) => items[Math.floor(next() * items.length)]!
  const entities: Array<{ name: string; entityType: string; observations: Array<string> }> = []
  const relations: Array<{ from: string; to: string; relationType: string }> = []
  const add = (name: string, entityType: string, ...observations: Array<string>) =>
    entities.push({ name, entityType, observations })

  for (const service of services)
    add(`${service}-service`, "service", `Owns the ${service} API`, `Deployed to eu-west and us-east`)
  for (const library of libraries) add(library, "library", `npm package ${library}`)
  for (const person of people) add(person, "person", `Maintainer; prefers small pull requests`)
  for (const concept of concepts) add(concept, "concept", `Applied across services`)
  for (const decision of decisions) add(decision, "decision", `Accepted after review`)
  for (const bug of bugs) add(bug, "bug", `Reported by an agent during a test run`)
  const modules: Array<string> = []
  for (const service of services)
    for (const part of ["api", "store", "worker", "client"]) {
      const name = `${service}/${part}`
      modules.push(name)
      add(name, "module", `The ${part} of ${service}`)
      relations.push({ from: name, to: `${service}-service`, relationType: "part_of" })
      relations.push({ from: name, to: pick(libraries), relationType: "depends_on" })
      if (next() < 0.6) relations.push({ from: name, to: pick(libraries), relationType: "depends_on" })
      if (next() < 0.5) relations.push({ from: name, to: pick(concepts), relationType: "applies" })
      for (let file = 0; file < 2; file++) {
        const fileName = `src/${service}/${part}${file === 0 ? "" : "-util"}.ts`
        add(fileName, "file", `${80 + Math.floor(next() * 400)} lines`)
        relations.push({ from: fileName, to: name, relationType: "belongs_to" })
      }
    }
  for (const service of services) relations.push({ from: pick(people), to: `${service}-service`, relationType: "owns" })
  for (const decision of decisions)
    relations.push({ from: decision, to: `${pick(services)}-service`, relationType: "governs" })
  for (const bug of bugs) {
    relations.push({ from: bug, to: pick(modules), relationType: "affects" })
    relations.push({ from: pick(people), to: bug, relationType: "fixing" })
  }
  relations.push({ from: "gateway-service", to: "identity-service", relationType: "calls" })
  relations.push({ from: "checkout-service", to: "billing-service", relationType: "calls" })
  relations.push({ from: "checkout-service", to: "notifications-service", relationType: "calls" })
  relations.push({ from: "search-service", to: "flexsearch", relationType: "depends_on" })

  for (let index = 0; index < entities.length; index += 50)
    await send(client, "create_entities", { entities: entities.slice(index, index + 50) })
  const unique = [
    ...new Map(
      relations.map((relation) => [`${relation.from}|${relation.relationType}|${relation.to}`, relation]),
    ).values(),
  ]
  for (let index = 0; index < unique.length; index += 100)
    await send(client, "create_relations", { relations: unique.slice(index, index + 100) })
  await send(client, "add_observations", {
    observations: [
      {
        entityName: "checkout-service",
        contents: ["Retries payment calls with an idempotency key", "p99 latency 140 ms after the cache change"],
      },
    ],
  })
  return { entities: entities.length, relations: unique.length, focus: "checkout-service" }
}

/** Writes tasks, notes, handoffs, summaries, conversations and gates. */
export const seedEverythingElse = async (client: Client): Promise<void> => {
  const tasks: ReadonlyArray<Record<string, unknown>> = [
    {
      title: "Add retry budget to checkout client",
      status: "todo",
      priority: "high",
      tags: ["reliability"],
      links: ["checkout/client"],
    },
    { title: "Document the WAL record format", status: "todo", priority: "low", tags: ["docs"] },
    {
      title: "Investigate index lag under load",
      status: "doing",
      priority: "urgent",
      assignee: "claude-code",
      links: ["BUG-142 index lag under load"],
    },
    {
      title: "Rotate gateway TLS certificates",
      status: "doing",
      priority: "medium",
      assignee: "grace",
      due: "2026-12-15",
    },
    {
      title: "Upgrade onnxruntime",
      status: "blocked",
      priority: "medium",
      description: "Waiting for a release with the arm64 fix.",
    },
    {
      title: "Fix duplicate retries in billing",
      status: "done",
      priority: "high",
      links: ["BUG-117 duplicate retries"],
    },
    { title: "Split search worker from API", status: "done", priority: "medium" },
  ]
  for (const task of tasks) await send(client, "add_task", task)
  await send(client, "add_sticky_note", {
    text: "Never bump lmdb without running the kill -9 suite.",
    tags: ["durability"],
    color: "yellow",
  })
  await send(client, "add_sticky_note", {
    text: "Staging is frozen until Friday's release.",
    tags: ["release"],
    color: "pink",
    ttl_seconds: 7 * 86_400,
  })
  await send(client, "add_sticky_note", { text: "Benchmarks: run with --quick on CI, full locally.", color: "blue" })
  await send(client, "add_handoff", {
    from_agent: "cursor",
    to_agent: "claude-code",
    summary: "Checkout retries are half done: client side merged, server-side dedup still open.",
    context: "See the idempotency key design in ADR-2.",
    files: ["src/checkout/client.ts", "src/checkout/api.ts"],
  })
  await send(client, "add_handoff", {
    from_agent: "claude-code",
    to_agent: "codex",
    summary: "Search latency dashboard needs a p99 panel.",
  })
  await send(client, "add_session_summary", {
    summary: "Made the search index catch up after restarts; added lag metrics.",
    agent: "claude-code",
    session_id: "s-2026-11-28",
    highlights: ["Index lag now reported in health", "Cold start 40% faster"],
    next_steps: ["Alert when lag exceeds 10k events"],
  })
  const messages: ReadonlyArray<[string, string, string]> = [
    ["debug-checkout", "user", "Checkout double-charges when the payment provider times out. Can you look?"],
    [
      "debug-checkout",
      "assistant",
      "The client retries without an idempotency key. I will add one and dedupe on the server.",
    ],
    ["debug-checkout", "user", "Great — keep the retry budget at three attempts."],
    ["plan-search", "user", "We need hybrid search over tasks and notes, not only the graph."],
    [
      "plan-search",
      "assistant",
      "Plan: full-text with FlexSearch, vectors with a static embedding model, fused by reciprocal rank.",
    ],
  ]
  for (const [session, role, content] of messages)
    await send(client, "write_message", {
      session_id: session,
      role,
      content,
      metadata_json: JSON.stringify({ tags: [session.split("-")[0]] }),
    })
  await send(client, "gate_set", { action: "push", status: "authorized", reason: "Tests green, history squashed" })
  await send(client, "gate_set", { action: "deploy", status: "blocked", reason: "Staging frozen until Friday" })
  await send(client, "gate_set", { action: "release", status: "pending" })
}
