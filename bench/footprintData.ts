/**
 * The footprint benchmark's data: a deterministic data directory of N records written the way
 * agents write them (through the MCP tools' handlers, on an engine in this process), and the same
 * knowledge graph as the official memory server's `memory.jsonl`.
 *
 *   40% graph entities (3 observations each, plus one relation per two entities)
 *   40% conversation messages (in sessions of about 40)
 *   20% engineering records (tasks and ADRs, 3:2)
 *
 * Texts are 6–30 words drawn from the default model's vocabulary (bench/search.ts), so the
 * embedder finds vectors for them as it would for real notes. The engine is closed cleanly once
 * search is warm and has caught up, so the directory is what a daemon leaves behind after a day's
 * work: checkpointed stores and search's persisted documents and vectors.
 */
import { writeFileSync } from "node:fs"
import { Effect, Exit, Layer, Schema, Scope } from "effect"
import * as Engine from "../src/Engine.ts"
import { SearchIndexer } from "../src/search/Indexer.ts"
import { catalogue } from "../src/tools/Catalogue.ts"
import type { SessionServices, ToolCaller } from "../src/tools/Tool.ts"
import { seededRandom } from "./Random.ts"
import { sentenceMaker, vocabulary } from "./search.ts"

/** Writes in flight while generating (they share group commits). */
const writersInFlight = 64
/** Entities per create_entities call. */
const entitiesPerCall = 100
const observationsPerEntity = 3
const messagesPerSession = 40
const caller: ToolCaller = { project: "default", client: "bench-footprint" }

/** How many records of each kind a data directory of `records` records holds. */
export const recordMix = (records: number) => {
  const entities = Math.round(records * 0.4)
  const messages = Math.round(records * 0.4)
  const engineering = records - entities - messages
  return { entities, relations: Math.floor(entities / 2), messages, engineering }
}

interface Entity {
  readonly name: string
  readonly entityType: string
  readonly observations: ReadonlyArray<string>
}

/** The deterministic corpus of a data directory of `records` records. */
export const footprintCorpus = (records: number, seed = 22) => {
  const random = seededRandom(seed)
  const words = vocabulary()
  const sentence = sentenceMaker(words, random)
  const text = () => sentence(6 + Math.floor(random() * 25))
  const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!
  const mix = recordMix(records)
  const types = ["person", "project", "service", "library", "decision", "bug", "meeting", "concept"]
  const entities: Array<Entity> = Array.from({ length: mix.entities }, (_, index) => ({
    name: `${pick(words)}-${index}`,
    entityType: pick(types),
    observations: Array.from({ length: observationsPerEntity }, text),
  }))
  const relations = Array.from({ length: mix.relations }, (_, index) => ({
    from: entities[index]!.name,
    to: entities[(index * 7919 + 13) % entities.length]!.name,
    relationType: pick(["depends_on", "owns", "mentions", "works_with"]),
  }))
  const message = (index: number) => ({
    session_id: `session-${Math.floor(index / messagesPerSession)}`,
    role: index % 2 === 0 ? "user" : "assistant",
    content: text(),
  })
  const engineering = (index: number): { tool: string; args: Record<string, unknown> } =>
    index % 5 < 3
      ? { tool: "add_task", args: { title: sentence(6), description: text() } }
      : { tool: "record_adr", args: { title: sentence(5), context: text(), decision: text(), consequences: text() } }
  return { mix, entities, relations, message, engineering }
}

/** The graph of the corpus as the official memory server's `memory.jsonl`. */
export const writeOfficialJsonl = (file: string, corpus: ReturnType<typeof footprintCorpus>): void => {
  const lines = [
    ...corpus.entities.map((entity) => JSON.stringify({ type: "entity", ...entity })),
    ...corpus.relations.map((relation) => JSON.stringify({ type: "relation", ...relation })),
  ]
  writeFileSync(file, `${lines.join("\n")}\n`)
}

const toolNamed = (name: string) => {
  const tool = catalogue.find((candidate) => candidate.definition.name === name)
  if (tool === undefined) throw new Error(`no tool ${name}`)
  return tool
}

/** Runs a tool's handler as a session would: arguments decoded by its Schema, failures raised. */
const callTool = (name: string, args: unknown) => {
  const tool = toolNamed(name)
  return Effect.flatMap(Schema.decodeUnknownEffect(tool.args)(args), (decoded) => tool.run(decoded as never, caller))
}

/** Runs `count` calls with `writersInFlight` in flight. */
const inFlight = (count: number, call: (index: number) => Effect.Effect<unknown, unknown, SessionServices>) => {
  let next = 0
  return Effect.forEach(
    Array.from({ length: writersInFlight }),
    () =>
      Effect.gen(function* () {
        while (next < count) yield* call(next++)
      }),
    { concurrency: "unbounded", discard: true },
  )
}

/** Writes the corpus into a fresh data directory and closes the engine once search is warm. */
export const generateDataDir = async (dataDir: string, corpus: ReturnType<typeof footprintCorpus>): Promise<void> => {
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(
    Layer.buildWithScope(Engine.layer({ dataDir, command: "mnemos bench footprint" }), scope),
  )
  const write = Effect.gen(function* () {
    const { entities, relations, mix } = corpus
    const calls = Math.ceil(entities.length / entitiesPerCall)
    yield* inFlight(calls, (index) =>
      callTool("create_entities", {
        entities: entities.slice(index * entitiesPerCall, (index + 1) * entitiesPerCall),
      }),
    )
    yield* inFlight(Math.ceil(relations.length / entitiesPerCall), (index) =>
      callTool("create_relations", {
        relations: relations.slice(index * entitiesPerCall, (index + 1) * entitiesPerCall),
      }),
    )
    yield* inFlight(mix.messages, (index) => callTool("write_message", corpus.message(index)))
    yield* inFlight(mix.engineering, (index) => {
      const { tool, args } = corpus.engineering(index)
      return callTool(tool, args)
    })
    const search = yield* SearchIndexer
    yield* search.awaitWarm
    yield* search.sync
  })
  try {
    await Effect.runPromise(Effect.provideContext(write, context as never) as Effect.Effect<void, unknown>)
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
