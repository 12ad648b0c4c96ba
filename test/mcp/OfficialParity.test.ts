/**
 * mnemos against the official memory server, at the protocol level: both run as real processes
 * and are driven over stdio by the SDK client with the SAME calls; their full results (isError,
 * text content, structuredContent) must be equal wherever the semantics agree. Each behaviour is
 * also pinned to an explicit expected value, so a test proves the behaviour and not only that
 * the two servers agree.
 *
 * The one deliberate difference (names are unique: a name, relation or observation repeated
 * inside one call is stored once) is asserted on its own, for both servers.
 */
import { type ResourceUpdatedNotification, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import fc from "fast-check"
import { afterEach, describe, expect, it } from "vitest"
import {
  call,
  callOk,
  cleanup,
  kill,
  type McpServerProcess,
  readGraph,
  restartMnemos,
  startMnemos,
  startOfficial,
  stop,
} from "../support/mcpClient.ts"

afterEach(cleanup)

type Args = Record<string, unknown>
type Call = readonly [tool: string, args: Args]

/** What one call answered. */
interface Step {
  readonly tool: string
  readonly isError: boolean
  readonly content: unknown
  readonly structuredContent: unknown
}

const runSteps = async (server: McpServerProcess, calls: ReadonlyArray<Call>): Promise<Array<Step>> => {
  const steps: Array<Step> = []
  for (const [tool, args] of calls) {
    const { raw } = await call(server.client, tool, args)
    steps.push({ tool, isError: raw.isError === true, content: raw.content, structuredContent: raw.structuredContent })
  }
  return steps
}

/** Starts both servers on empty stores. */
const both = async () => {
  const [official, mnemos] = await Promise.all([startOfficial(), startMnemos()])
  return { official, mnemos }
}

/** Runs the same calls on both servers (each in order, the two side by side) and returns both answers. */
const runBoth = async (calls: ReadonlyArray<Call>) => {
  const servers = await both()
  const [official, mnemos] = await Promise.all([runSteps(servers.official, calls), runSteps(servers.mnemos, calls)])
  return { official, mnemos, servers }
}

const entity = (name: string, entityType = "thing", observations: ReadonlyArray<string> = []) => ({
  name,
  entityType,
  observations: [...observations],
})
const relation = (from: string, to: string, relationType = "knows") => ({ from, to, relationType })
const text = (value: string) => [{ type: "text", text: value }]
/** The official text content of a graph-shaped or list-shaped result: pretty-printed JSON. */
const jsonText = (value: unknown) => text(JSON.stringify(value, null, 2))

/** The entities / relations of a successful graph-shaped answer. */
const graphOf = (step: Step | undefined) => {
  expect(step?.isError).toBe(false)
  return step?.structuredContent as { entities: Array<{ name: string }>; relations: Array<unknown> }
}
const entitiesOf = (step: Step | undefined) => graphOf(step).entities
const relationsOf = (step: Step | undefined) => graphOf(step).relations

/** Asserts that a step succeeded with `structured` as its structured content and text. */
const expectAnswer = (step: Step | undefined, structured: unknown, textValue: unknown = structured) => {
  expect(step?.isError).toBe(false)
  expect(step?.structuredContent).toEqual(structured)
  expect(step?.content).toEqual(jsonText(textValue))
}

/** Runs `calls` on both servers and requires equal results; returns the (equal) official steps. */
const expectParity = async (calls: ReadonlyArray<Call>): Promise<Array<Step>> => {
  const { official, mnemos } = await runBoth(calls)
  expect(mnemos).toEqual(official)
  return official
}

const deletionMessages = {
  delete_entities: "Entities deleted successfully",
  delete_observations: "Observations deleted successfully",
  delete_relations: "Relations deleted successfully",
} as const
const expectDeleted = (step: Step | undefined, tool: keyof typeof deletionMessages) => {
  expect(step?.isError).toBe(false)
  expect(step?.content).toEqual(text(deletionMessages[tool]))
  expect(step?.structuredContent).toEqual({ success: true, message: deletionMessages[tool] })
}

describe("official parity over stdio", () => {
  it("text content of the three creating tools is the official text (the bare JSON array)", async () => {
    const { official, mnemos } = await runBoth([
      ["create_entities", { entities: [entity("A", "person", ["likes tea"])] }],
      ["create_relations", { relations: [relation("A", "B")] }],
      ["add_observations", { observations: [{ entityName: "A", contents: ["drinks coffee"] }] }],
    ])
    // The official server prints the array itself; structuredContent wraps it.
    expect(official[0]?.content).toEqual(jsonText([entity("A", "person", ["likes tea"])]))
    expect(official[1]?.content).toEqual(jsonText([relation("A", "B")]))
    expect(official[2]?.content).toEqual(jsonText([{ entityName: "A", addedObservations: ["drinks coffee"] }]))
    // Full results, text included, must be the same.
    expect(mnemos).toEqual(official)
  })

  it("create_entities skips names that exist and returns only the new entities", async () => {
    const steps = await expectParity([
      ["create_entities", { entities: [entity("Alice", "person", ["likes tea"]), entity("Bob", "person")] }],
      ["create_entities", { entities: [entity("Alice", "robot", ["other"]), entity("Carol", "person", ["new"])] }],
      ["create_entities", { entities: [entity("Bob"), entity("Carol")] }],
      ["create_entities", { entities: [] }],
      ["read_graph", {}],
    ])
    expect(steps[0]?.structuredContent).toEqual({
      entities: [entity("Alice", "person", ["likes tea"]), entity("Bob", "person")],
    })
    expect(steps[1]?.structuredContent).toEqual({ entities: [entity("Carol", "person", ["new"])] })
    expect(steps[2]?.structuredContent).toEqual({ entities: [] })
    expect(steps[3]?.structuredContent).toEqual({ entities: [] })
    expectAnswer(steps[4], {
      entities: [entity("Alice", "person", ["likes tea"]), entity("Bob", "person"), entity("Carol", "person", ["new"])],
      relations: [],
    })
  })

  it("create_relations skips existing relations and does not require the endpoints to exist", async () => {
    const steps = await expectParity([
      ["create_entities", { entities: [entity("Alice"), entity("Bob")] }],
      ["create_relations", { relations: [relation("Alice", "Bob"), relation("Alice", "Ghost", "haunts")] }],
      [
        "create_relations",
        {
          relations: [
            relation("Alice", "Bob"),
            relation("Nobody", "Nowhere", "visits"),
            relation("Alice", "Bob", "likes"),
            relation("Bob", "Alice"),
            relation("Alice", "Alice", "is"),
          ],
        },
      ],
      ["read_graph", {}],
    ])
    expect(steps[1]?.structuredContent).toEqual({
      relations: [relation("Alice", "Bob"), relation("Alice", "Ghost", "haunts")],
    })
    expect(steps[2]?.structuredContent).toEqual({
      relations: [
        relation("Nobody", "Nowhere", "visits"),
        relation("Alice", "Bob", "likes"),
        relation("Bob", "Alice"),
        relation("Alice", "Alice", "is"),
      ],
    })
    expectAnswer(steps[3], {
      entities: [entity("Alice"), entity("Bob")],
      relations: [
        relation("Alice", "Bob"),
        relation("Alice", "Ghost", "haunts"),
        relation("Nobody", "Nowhere", "visits"),
        relation("Alice", "Bob", "likes"),
        relation("Bob", "Alice"),
        relation("Alice", "Alice", "is"),
      ],
    })
  })

  it("delete_entities deletes the entities and every relation touching them, dangling names included", async () => {
    const steps = await expectParity([
      ["create_entities", { entities: [entity("A"), entity("B"), entity("C")] }],
      [
        "create_relations",
        {
          relations: [
            relation("A", "B"),
            relation("B", "C"),
            relation("C", "A"),
            relation("C", "Ghost"),
            relation("Ghost", "A"),
            relation("C", "C", "self"),
          ],
        },
      ],
      ["delete_entities", { entityNames: ["B", "Ghost", "NeverExisted"] }],
      ["read_graph", {}],
      ["delete_entities", { entityNames: ["C"] }],
      ["read_graph", {}],
      ["delete_entities", { entityNames: [] }],
      ["read_graph", {}],
    ])
    expectDeleted(steps[2], "delete_entities")
    expectAnswer(steps[3], {
      entities: [entity("A"), entity("C")],
      relations: [relation("C", "A"), relation("C", "C", "self")],
    })
    expectAnswer(steps[5], { entities: [entity("A")], relations: [] })
    expectAnswer(steps[7], { entities: [entity("A")], relations: [] })
  })

  it("add_observations on a missing entity fails the whole call and changes nothing", async () => {
    const steps = await expectParity([
      ["create_entities", { entities: [entity("A", "t", ["one"]), entity("B")] }],
      ["read_graph", {}],
      [
        "add_observations",
        {
          observations: [
            { entityName: "A", contents: ["two"] },
            { entityName: "Missing", contents: ["x"] },
            { entityName: "B", contents: ["three"] },
          ],
        },
      ],
      ["read_graph", {}],
      ["add_observations", { observations: [{ entityName: "a", contents: ["case matters"] }] }],
      ["read_graph", {}],
    ])
    expect(steps[2]).toEqual({
      tool: "add_observations",
      isError: true,
      content: text("Entity with name Missing not found"),
      structuredContent: undefined,
    })
    expect(steps[3]).toEqual(steps[1])
    expect(steps[4]?.content).toEqual(text("Entity with name a not found"))
    expect(steps[5]).toEqual(steps[1])
  })

  it("add_observations adds only new contents, later items see earlier ones, and reports per item", async () => {
    const steps = await expectParity([
      ["create_entities", { entities: [entity("A", "t", ["one"]), entity("B")] }],
      [
        "add_observations",
        {
          observations: [
            { entityName: "A", contents: ["one", "two"] },
            { entityName: "B", contents: [] },
            { entityName: "A", contents: ["two", "three"] },
          ],
        },
      ],
      ["add_observations", { observations: [{ entityName: "A", contents: ["one"] }] }],
      ["read_graph", {}],
    ])
    expect(steps[1]?.structuredContent).toEqual({
      results: [
        { entityName: "A", addedObservations: ["two"] },
        { entityName: "B", addedObservations: [] },
        { entityName: "A", addedObservations: ["three"] },
      ],
    })
    expect(steps[2]?.structuredContent).toEqual({ results: [{ entityName: "A", addedObservations: [] }] })
    expectAnswer(steps[3], { entities: [entity("A", "t", ["one", "two", "three"]), entity("B")], relations: [] })
  })

  it("search_nodes matches name, type or observation in any case, with relations where either end matches", async () => {
    const setup: Array<Call> = [
      [
        "create_entities",
        {
          entities: [
            entity("Alice", "person", ["Likes Green TEA", "works at Acme"]),
            entity("Bob", "person", ["drinks coffee"]),
            entity("acme", "Organization", []),
            entity("Straße", "place", ["ΟΔΟΣ is a Greek word", "İstanbul trip"]),
            entity("Rocket 🚀", "emoji", ["a\u0000b"]),
          ],
        },
      ],
      [
        "create_relations",
        {
          relations: [
            relation("Alice", "Bob"),
            relation("Bob", "acme", "works_at"),
            relation("Alice", "acme", "works_at"),
            relation("Ghost", "Alice", "haunts"),
            relation("Bob", "Straße", "lives_on"),
          ],
        },
      ],
    ]
    const queries = [
      "alice", // name, different case
      "PERSON", // type
      "green tea", // observation, different case
      "organization",
      "acme", // name of one, observation of another
      "Coffee",
      "nothing matches this",
      "", // the empty query matches everything
      "STRASSE", // no: "ß".toLowerCase() stays "ß"
      "straße",
      "STRAßE",
      "οδος", // final sigma: "ΟΔΟΣ".toLowerCase() is "οδος"
      "οδοσ",
      "i̇stanbul",
      "İSTANBUL",
      "🚀",
      "\uD83D", // half of the surrogate pair matches in official `includes`
      "\u0000",
      "a\u0000b",
      "o",
    ]
    const steps = await expectParity([...setup, ...queries.map((query): Call => ["search_nodes", { query }])])
    const answer = (query: string) => steps[setup.length + queries.indexOf(query)]
    expectAnswer(answer("alice"), {
      entities: [entity("Alice", "person", ["Likes Green TEA", "works at Acme"])],
      relations: [
        relation("Alice", "Bob"),
        relation("Alice", "acme", "works_at"),
        relation("Ghost", "Alice", "haunts"),
      ],
    })
    expect(entitiesOf(answer("PERSON")).map((e) => e.name)).toEqual(["Alice", "Bob"])
    expectAnswer(answer("Coffee"), {
      entities: [entity("Bob", "person", ["drinks coffee"])],
      relations: [relation("Alice", "Bob"), relation("Bob", "acme", "works_at"), relation("Bob", "Straße", "lives_on")],
    })
    expectAnswer(answer("nothing matches this"), { entities: [], relations: [] })
    expect(entitiesOf(answer(""))).toHaveLength(5)
    expect(relationsOf(answer(""))).toHaveLength(5)
    expect(entitiesOf(answer("STRASSE"))).toHaveLength(0)
    expect(entitiesOf(answer("STRAßE"))).toHaveLength(1)
    expect(entitiesOf(answer("οδος"))).toHaveLength(1)
    expect(entitiesOf(answer("οδοσ"))).toHaveLength(0)
    expect(entitiesOf(answer("\uD83D"))).toHaveLength(1)
  })

  it("search_nodes agrees on many substrings and case variants of the stored texts", async () => {
    const texts = ["Alpha Centauri", "ΟΔΟΣ", "Straße", "İstanbul", "x😀y", "MiXeD case", "tab\there"]
    const names = texts.map((value, index) => `${value} #${index}`)
    const entities = names.map((name, index) =>
      entity(name, index % 2 === 0 ? "Even" : "odd", [texts[(index + 3) % texts.length]!]),
    )
    const queries = new Set<string>()
    for (const value of [...names, "Even", "odd"]) {
      for (let start = 0; start < value.length; start += 2) {
        const fragment = value.slice(start, start + 4)
        queries.add(fragment)
        queries.add(fragment.toUpperCase())
        queries.add(fragment.toLowerCase())
      }
    }
    const calls: Array<Call> = [
      ["create_entities", { entities }],
      ["create_relations", { relations: [relation(names[0]!, names[1]!), relation(names[2]!, "elsewhere")] }],
      ...[...queries].map((query): Call => ["search_nodes", { query }]),
    ]
    const steps = await expectParity(calls)
    expect(steps.filter((step) => step.isError)).toEqual([])
  })

  it("open_nodes returns the found entities in graph order and relations with either end requested", async () => {
    const steps = await expectParity([
      ["create_entities", { entities: [entity("A"), entity("B"), entity("C"), entity("D")] }],
      [
        "create_relations",
        {
          relations: [
            relation("A", "B"),
            relation("C", "A"),
            relation("C", "D"),
            relation("D", "Ghost"),
            relation("Ghost", "Phantom"),
          ],
        },
      ],
      ["open_nodes", { names: ["C", "A", "Missing", "A"] }],
      ["open_nodes", { names: ["Ghost"] }],
      ["open_nodes", { names: ["D"] }],
      ["open_nodes", { names: [] }],
    ])
    expectAnswer(steps[2], {
      entities: [entity("A"), entity("C")],
      relations: [relation("A", "B"), relation("C", "A"), relation("C", "D")],
    })
    // A requested name with no entity pulls in nothing, not even the dangling relations naming it.
    expectAnswer(steps[3], { entities: [], relations: [] })
    expectAnswer(steps[4], { entities: [entity("D")], relations: [relation("C", "D"), relation("D", "Ghost")] })
    expectAnswer(steps[5], { entities: [], relations: [] })
  })

  it("read_graph keeps creation order: re-created entities and relations go last, observations append", async () => {
    const steps = await expectParity([
      ["create_entities", { entities: [entity("A", "t", ["a1", "a2"]), entity("B"), entity("C")] }],
      ["create_relations", { relations: [relation("A", "B"), relation("B", "C"), relation("C", "A")] }],
      ["delete_entities", { entityNames: ["A"] }],
      ["create_entities", { entities: [entity("A", "t2", ["fresh"])] }],
      ["delete_relations", { relations: [relation("B", "C")] }],
      ["create_relations", { relations: [relation("B", "C"), relation("A", "B")] }],
      ["add_observations", { observations: [{ entityName: "B", contents: ["b1", "b2"] }] }],
      ["delete_observations", { deletions: [{ entityName: "B", observations: ["b1"] }] }],
      ["add_observations", { observations: [{ entityName: "B", contents: ["b1"] }] }],
      ["read_graph", {}],
    ])
    expectAnswer(steps[9], {
      entities: [entity("B", "thing", ["b2", "b1"]), entity("C"), entity("A", "t2", ["fresh"])],
      relations: [relation("B", "C"), relation("A", "B")],
    })
  })

  it("delete_observations and delete_relations remove exactly what is listed, ignoring unknowns", async () => {
    const steps = await expectParity([
      ["create_entities", { entities: [entity("A", "t", ["o1", "o2", "o3"]), entity("B", "t", ["o1"])] }],
      ["create_relations", { relations: [relation("A", "B"), relation("A", "B", "likes"), relation("B", "A")] }],
      [
        "delete_observations",
        {
          deletions: [
            { entityName: "A", observations: ["o1", "o3", "not there"] },
            { entityName: "Missing", observations: ["o1"] },
            { entityName: "B", observations: [] },
          ],
        },
      ],
      [
        "delete_relations",
        {
          relations: [
            relation("A", "B", "likes"),
            relation("X", "Y"),
            relation("A", "B", "LIKES"),
            relation("A", "Ghost"),
          ],
        },
      ],
      ["read_graph", {}],
      ["delete_relations", { relations: [] }],
      ["delete_observations", { deletions: [] }],
      ["read_graph", {}],
    ])
    expectDeleted(steps[2], "delete_observations")
    expectDeleted(steps[3], "delete_relations")
    expectAnswer(steps[4], {
      entities: [entity("A", "t", ["o2"]), entity("B", "t", ["o1"])],
      relations: [relation("A", "B"), relation("B", "A")],
    })
    expectDeleted(steps[5], "delete_relations")
    expectDeleted(steps[6], "delete_observations")
    expect(steps[7]).toEqual(steps[4])
  })

  it("random operation sequences give the same answers on both servers", async () => {
    const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31)
    console.log(`OfficialParity random sequences: fast-check seed ${seed} (rerun with FC_SEED=${seed})`)
    const { official, mnemos } = await both()
    const name = fc.constantFrom("A", "a", "B", "Straße", "ΟΔΟΣ", "x😀", "C d")
    const word = fc.constantFrom("tea", "TEA", "Tea time", "ß", "σ", "", "x😀", "a b", "İ")
    const unique = <T>(items: ReadonlyArray<T>, key: (item: T) => string) => {
      const seen = new Set<string>()
      return items.filter((item) => {
        if (seen.has(key(item))) return false
        seen.add(key(item))
        return true
      })
    }
    const words = fc.array(word, { maxLength: 4 }).map((items) => unique(items, (item) => item))
    const relationArb = fc.record({ from: name, to: name, relationType: fc.constantFrom("knows", "Knows", "owns") })
    // Within one call: no repeated name, relation or observation (the documented difference).
    const operation: fc.Arbitrary<Call> = fc.oneof(
      fc
        .array(fc.record({ name, entityType: word, observations: words }), { maxLength: 3 })
        .map((entities): Call => ["create_entities", { entities: unique(entities, (item) => item.name) }]),
      fc
        .array(relationArb, { maxLength: 3 })
        .map(
          (relations): Call => ["create_relations", { relations: unique(relations, (item) => JSON.stringify(item)) }],
        ),
      fc
        .array(fc.record({ entityName: name, contents: words }), { maxLength: 3 })
        .map((observations): Call => ["add_observations", { observations }]),
      fc.array(name, { maxLength: 3 }).map((entityNames): Call => ["delete_entities", { entityNames }]),
      fc
        .array(fc.record({ entityName: name, observations: fc.array(word, { maxLength: 3 }) }), { maxLength: 2 })
        .map((deletions): Call => ["delete_observations", { deletions }]),
      fc.array(relationArb, { maxLength: 3 }).map((relations): Call => ["delete_relations", { relations }]),
      fc
        .string({ unit: fc.constantFrom("a", "T", "e", "ß", "Σ", "ς", "\uD83D", " ", "İ", "i"), maxLength: 3 })
        .map((query): Call => ["search_nodes", { query }]),
      fc.array(name, { maxLength: 3 }).map((names): Call => ["open_nodes", { names }]),
      fc.constant<Call>(["read_graph", {}]),
    )
    const clear = async (server: McpServerProcess) => {
      const graph = await readGraph(server.client)
      const names = [...graph.entities.map((e) => e.name), ...graph.relations.flatMap((r) => [r.from, r.to])]
      await callOk(server.client, "delete_entities", { entityNames: [...new Set(names)] })
      expect(await readGraph(server.client)).toEqual({ entities: [], relations: [] })
    }
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 20 }), async (calls) => {
        await Promise.all([clear(official), clear(mnemos)])
        const withRead: Array<Call> = [...calls, ["read_graph", {}]]
        const [expected, actual] = await Promise.all([runSteps(official, withRead), runSteps(mnemos, withRead)])
        expect(actual).toEqual(expected)
      }),
      { numRuns: 60, seed },
    )
  })

  it("tools/list of mnemos holds the nine official tools, deep-equal to the official definitions", async () => {
    const { official, mnemos } = await both()
    const [officialTools, mnemosTools] = await Promise.all([official.client.listTools(), mnemos.client.listTools()])
    const officialNames = [
      "create_entities",
      "create_relations",
      "add_observations",
      "delete_entities",
      "delete_observations",
      "delete_relations",
      "read_graph",
      "search_nodes",
      "open_nodes",
    ]
    expect(officialTools.tools.map((tool) => tool.name)).toEqual(officialNames)
    for (const tool of officialTools.tools) {
      const ours = mnemosTools.tools.find((candidate) => candidate.name === tool.name)
      expect(ours, tool.name).toEqual(tool)
      // The fields clients read, one by one, so a failure names the field.
      for (const field of ["title", "description", "inputSchema", "outputSchema", "annotations", "execution"] as const)
        expect(ours?.[field], `${tool.name}.${field}`).toEqual(tool[field])
    }
    // In the official order, first, with mnemos's own tools after them.
    expect(mnemosTools.tools.slice(0, officialNames.length)).toEqual(officialTools.tools)
    expect(new Set(mnemosTools.tools.map((tool) => tool.name)).size).toBe(mnemosTools.tools.length)
  })

  it("the resource memory://knowledge-graph is listed and reads as the whole graph, as the official server does", async () => {
    const { official, mnemos } = await both()
    const setup: Array<Call> = [
      ["create_entities", { entities: [entity("A", "t", ["o"]), entity("B")] }],
      ["create_relations", { relations: [relation("A", "B"), relation("B", "Ghost")] }],
    ]
    await Promise.all([runSteps(official, setup), runSteps(mnemos, setup)])
    const [officialList, mnemosList] = await Promise.all([
      official.client.listResources(),
      mnemos.client.listResources(),
    ])
    expect(mnemosList.resources).toEqual(officialList.resources)
    expect(officialList.resources.map((resource) => resource.uri)).toEqual(["memory://knowledge-graph"])
    const [officialRead, mnemosRead] = await Promise.all([
      official.client.readResource({ uri: "memory://knowledge-graph" }),
      mnemos.client.readResource({ uri: "memory://knowledge-graph" }),
    ])
    expect(mnemosRead).toEqual(officialRead)
    const graph = {
      entities: [entity("A", "t", ["o"]), entity("B")],
      relations: [relation("A", "B"), relation("B", "Ghost")],
    }
    expect(mnemosRead.contents).toEqual([
      { uri: "memory://knowledge-graph", mimeType: "application/json", text: JSON.stringify(graph, null, 2) },
    ])
  })

  it("subscribing to memory://knowledge-graph yields notifications/resources/updated after a mutation", async () => {
    const { official, mnemos } = await both()
    const nextUpdate = (server: McpServerProcess, timeoutMs = 15_000) =>
      new Promise<ResourceUpdatedNotification>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${server.kind}: no notifications/resources/updated within ${timeoutMs} ms`)),
          timeoutMs,
        )
        server.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
          clearTimeout(timer)
          resolve(notification)
        })
      })
    for (const server of [official, mnemos]) {
      await server.client.subscribeResource({ uri: "memory://knowledge-graph" })
      const updated = nextUpdate(server)
      await callOk(server.client, "create_entities", { entities: [entity("A")] })
      expect((await updated).params.uri, server.kind).toBe("memory://knowledge-graph")
      // And again for another kind of mutation.
      const again = nextUpdate(server)
      await callOk(server.client, "add_observations", { observations: [{ entityName: "A", contents: ["o"] }] })
      expect((await again).params.uri, server.kind).toBe("memory://knowledge-graph")
    }
  })

  it("everything survives a SIGTERM and restart of mnemos on the same data directory", async () => {
    let mnemos = await startMnemos()
    const setup: Array<Call> = [
      ["create_entities", { entities: [entity("A", "t", ["a1", "a2"]), entity("B"), entity("C", "t", ["c"])] }],
      ["create_relations", { relations: [relation("A", "B"), relation("B", "C"), relation("C", "Ghost")] }],
      ["add_observations", { observations: [{ entityName: "B", contents: ["b1"] }] }],
      ["delete_observations", { deletions: [{ entityName: "A", observations: ["a1"] }] }],
      ["delete_relations", { relations: [relation("B", "C")] }],
      ["delete_entities", { entityNames: ["C"] }],
      ["create_entities", { entities: [entity("C", "again")] }],
    ]
    for (const step of await runSteps(mnemos, setup)) expect(step.isError, step.tool).toBe(false)
    const reads: Array<Call> = [
      ["read_graph", {}],
      ["search_nodes", { query: "a" }],
      ["open_nodes", { names: ["A", "B"] }],
    ]
    const before = await runSteps(mnemos, reads)
    expectAnswer(before[0], {
      entities: [entity("A", "t", ["a2"]), entity("B", "thing", ["b1"]), entity("C", "again")],
      relations: [relation("A", "B")],
    })

    mnemos = await restartMnemos(mnemos, "SIGTERM")
    expect(await runSteps(mnemos, reads)).toEqual(before)

    // It keeps working after the restart, and creation order continues where it stopped.
    await callOk(mnemos.client, "create_entities", { entities: [entity("D")] })
    await callOk(mnemos.client, "create_relations", { relations: [relation("D", "A")] })
    expect(await readGraph(mnemos.client)).toEqual({
      entities: [entity("A", "t", ["a2"]), entity("B", "thing", ["b1"]), entity("C", "again"), entity("D")],
      relations: [relation("A", "B"), relation("D", "A")],
    })
    await kill(mnemos, "SIGTERM")
    expect(mnemos.stderr()).toMatch(/shutting down/)
  })

  it("strings with lone surrogates come back unchanged after a restart, as from the official server", async () => {
    // JSON (and so MCP) carries lone surrogates ("\ud800"); both servers accept them. The
    // official server's JSONL file keeps them exactly. mnemos must too, or refuse them up front:
    // acknowledging a write and later reading back different text is data corruption.
    let { official, mnemos } = await both()
    const setup: Array<Call> = [
      [
        "create_entities",
        {
          entities: [
            entity("plain", "t", ["half \uD83D of an emoji", "ok"]),
            entity("lone \uD800 high", "type \uDC00", ["x"]),
          ],
        },
      ],
      ["create_relations", { relations: [relation("plain", "lone \uD800 high", "rel \uDFFF")] }],
    ]
    for (const server of [official, mnemos])
      for (const step of await runSteps(server, setup)) expect(step.isError, `${server.kind} ${step.tool}`).toBe(false)
    const expected = {
      entities: [
        entity("plain", "t", ["half \uD83D of an emoji", "ok"]),
        entity("lone \uD800 high", "type \uDC00", ["x"]),
      ],
      relations: [relation("plain", "lone \uD800 high", "rel \uDFFF")],
    }
    expect(await readGraph(official.client)).toEqual(expected)
    expect(await readGraph(mnemos.client)).toEqual(expected)

    await stop(official)
    official = await startOfficial(official.location)
    mnemos = await restartMnemos(mnemos, "SIGTERM")
    expect(await readGraph(official.client)).toEqual(expected)
    expect(await readGraph(mnemos.client)).toEqual(expected)
  })

  it("acknowledged writes also survive SIGKILL of mnemos", async () => {
    let mnemos = await startMnemos()
    await callOk(mnemos.client, "create_entities", { entities: [entity("A", "t", ["o"]), entity("B")] })
    await callOk(mnemos.client, "create_relations", { relations: [relation("A", "B")] })
    await callOk(mnemos.client, "add_observations", { observations: [{ entityName: "B", contents: ["acked"] }] })
    const before = await readGraph(mnemos.client)
    mnemos = await restartMnemos(mnemos, "SIGKILL")
    expect(await readGraph(mnemos.client)).toEqual(before)
    expect(before.entities).toHaveLength(2)
  })

  it("documented difference: a name, relation or observation repeated inside one call is stored once by mnemos", async () => {
    const { official, mnemos } = await runBoth([
      ["create_entities", { entities: [entity("X", "first", ["o", "o"]), entity("X", "second"), entity("Y")] }],
      ["create_relations", { relations: [relation("X", "Y"), relation("X", "Y")] }],
      ["add_observations", { observations: [{ entityName: "Y", contents: ["p", "p"] }] }],
      ["read_graph", {}],
    ])
    // The official server stores every copy: two entities named X, two equal relations.
    expect(official[0]?.structuredContent).toEqual({
      entities: [entity("X", "first", ["o", "o"]), entity("X", "second"), entity("Y")],
    })
    expect(official[1]?.structuredContent).toEqual({ relations: [relation("X", "Y"), relation("X", "Y")] })
    expect(official[2]?.structuredContent).toEqual({ results: [{ entityName: "Y", addedObservations: ["p", "p"] }] })
    expectAnswer(official[3], {
      entities: [entity("X", "first", ["o", "o"]), entity("X", "second"), entity("Y", "thing", ["p", "p"])],
      relations: [relation("X", "Y"), relation("X", "Y")],
    })
    // mnemos keeps names unique: the first X is created, the second skipped; copies are stored once.
    expect(mnemos[0]?.structuredContent).toEqual({ entities: [entity("X", "first", ["o"]), entity("Y")] })
    expect(mnemos[1]?.structuredContent).toEqual({ relations: [relation("X", "Y")] })
    expect(mnemos[2]?.structuredContent).toEqual({ results: [{ entityName: "Y", addedObservations: ["p"] }] })
    expectAnswer(mnemos[3], {
      entities: [entity("X", "first", ["o"]), entity("Y", "thing", ["p"])],
      relations: [relation("X", "Y")],
    })
  })
})
