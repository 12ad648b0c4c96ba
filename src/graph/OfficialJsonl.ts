/**
 * The official server's `memory.jsonl` format, read and written.
 *
 * From `KnowledgeGraphManager.loadGraph`/`saveGraph` in the official dist/index.js:
 *
 * - Writing: one `JSON.stringify` line per entity, `{"type":"entity","name","entityType",
 *   "observations"}`, then one per relation, `{"type":"relation","from","to","relationType"}`,
 *   joined with "\n" and NO trailing newline; an empty graph is the empty file.
 * - Reading: `data.split("\n")`, lines whose `trim()` is empty are skipped, every other line is
 *   `JSON.parse`d (a bad line fails the whole load); objects with `type` "entity" or "relation"
 *   are kept (only the three official fields of each), anything else is silently ignored.
 *   Duplicate names are kept as they are (the official graph is a list).
 *
 * mnemos reads the same files, all or nothing, but stricter where the official server would
 * load garbage: a line that is not JSON, not an object, or an entity/relation missing a field
 * or with a field of the wrong type is reported as `MalformedJsonlLine` with its 1-based line
 * number (counting every "\n"-separated line, blank ones included). Objects of another `type`
 * are skipped as the official server skips them, and their line numbers are reported. A
 * leading byte-order mark is tolerated (the official server would fail on it).
 *
 * A file is read line by line (`officialJsonlFileItems`), `readChunkBytes` at a time, so an import
 * holds one line and what it has decoded, never the whole text: it reads the file once to check
 * every line and again to apply it.
 */
import { closeSync, openSync, readSync } from "node:fs"
import { StringDecoder } from "node:string_decoder"
import { Effect, Predicate, Result, Schema } from "effect"
import type { Entity, KnowledgeGraph, Relation } from "./Model.ts"

/** A line of memory.jsonl could not be read; nothing from the file is used. */
export class MalformedJsonlLine extends Schema.TaggedError<MalformedJsonlLine>()("MalformedJsonlLine", {
  /** 1-based line number. */
  line: Schema.Int,
  message: Schema.String,
  /** The start of the offending line, for the error report. */
  excerpt: Schema.String,
}) {}

/** What reading a memory.jsonl yields. */
export interface ParsedOfficialJsonl {
  readonly graph: KnowledgeGraph
  /** Line numbers of JSON objects skipped because their `type` is neither "entity" nor "relation". */
  readonly ignoredLines: ReadonlyArray<number>
}

/** Characters of a bad line quoted in the error. */
const excerptCharsMax = 120

const EntityLine = Schema.Struct({
  type: Schema.Literal("entity"),
  name: Schema.String,
  entityType: Schema.String,
  observations: Schema.Array(Schema.String),
})

const RelationLine = Schema.Struct({
  type: Schema.Literal("relation"),
  from: Schema.String,
  to: Schema.String,
  relationType: Schema.String,
})

const decodeEntityLine = Schema.decodeUnknownResult(EntityLine)
const decodeRelationLine = Schema.decodeUnknownResult(RelationLine)

const parseJson = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (error) {
    return Result.fail(error instanceof Error ? error.message : String(error))
  }
}

/** What one line of memory.jsonl holds (blank lines hold nothing and are not reported). */
export type OfficialJsonlItem =
  | { readonly _tag: "Entity"; readonly entity: Entity }
  | { readonly _tag: "Relation"; readonly relation: Relation }
  | { readonly _tag: "Ignored"; readonly line: number }

/** Decodes line number `lineNumber` (1-based); `undefined` for a blank line. */
export const decodeOfficialJsonlLine = (
  line: string,
  lineNumber: number,
): Result.Result<OfficialJsonlItem | undefined, MalformedJsonlLine> => {
  if (line.trim() === "") return Result.succeed(undefined)
  const malformed = (message: string) =>
    Result.fail(new MalformedJsonlLine({ line: lineNumber, message, excerpt: line.slice(0, excerptCharsMax) }))
  const parsed = parseJson(line)
  if (Result.isFailure(parsed)) return malformed(`not JSON: ${parsed.failure}`)
  const item = parsed.success
  if (!Predicate.isObject(item)) return malformed("not a JSON object")
  if (item.type === "entity") {
    const entity = decodeEntityLine(item)
    if (Result.isFailure(entity)) return malformed(`bad entity: ${entity.failure.message}`)
    const { name, entityType, observations } = entity.success
    return Result.succeed({ _tag: "Entity", entity: { name, entityType, observations } })
  }
  if (item.type === "relation") {
    const relation = decodeRelationLine(item)
    if (Result.isFailure(relation)) return malformed(`bad relation: ${relation.failure.message}`)
    const { from, to, relationType } = relation.success
    return Result.succeed({ _tag: "Relation", relation: { from, to, relationType } })
  }
  return Result.succeed({ _tag: "Ignored", line: lineNumber })
}

/** Decodes every line of `lines` (1-based numbers), stopping at the first malformed one. */
function* decodeLines(
  lines: Iterable<string>,
): Iterable<Result.Result<OfficialJsonlItem | undefined, MalformedJsonlLine>> {
  let lineNumber = 0
  for (const line of lines) {
    const decoded = decodeOfficialJsonlLine(line, ++lineNumber)
    yield decoded
    if (Result.isFailure(decoded)) return
  }
}

/** Collects decoded items into a graph; all or nothing. */
const collect = (
  items: Iterable<Result.Result<OfficialJsonlItem | undefined, MalformedJsonlLine>>,
): Result.Result<ParsedOfficialJsonl, MalformedJsonlLine> => {
  const entities: Array<Entity> = []
  const relations: Array<Relation> = []
  const ignoredLines: Array<number> = []
  for (const decoded of items) {
    if (Result.isFailure(decoded)) return Result.fail(decoded.failure)
    const item = decoded.success
    if (item?._tag === "Entity") entities.push(item.entity)
    else if (item?._tag === "Relation") relations.push(item.relation)
    else if (item?._tag === "Ignored") ignoredLines.push(item.line)
  }
  return Result.succeed({ graph: { entities, relations }, ignoredLines })
}

/** Reads memory.jsonl text; all or nothing. */
export const decodeOfficialJsonl = (text: string): Result.Result<ParsedOfficialJsonl, MalformedJsonlLine> =>
  collect(decodeLines((text.startsWith("\uFEFF") ? text.slice(1) : text).split("\n")))

/** Bytes read from a memory.jsonl file at a time. */
export const readChunkBytes = 1 << 20

/**
 * The "\n"-separated lines of `file` as UTF-8 text (a leading byte-order mark dropped), read
 * `readChunkBytes` at a time: the same lines as splitting the whole text. Throws on I/O errors.
 */
export function* fileLines(file: string, chunkBytes = readChunkBytes): Iterable<string> {
  const fd = openSync(file, "r")
  try {
    const decoder = new StringDecoder("utf8")
    const buffer = Buffer.alloc(chunkBytes)
    let pending = ""
    let first = true
    for (;;) {
      const bytes = readSync(fd, buffer, 0, buffer.length, null)
      let text = bytes === 0 ? decoder.end() : decoder.write(buffer.subarray(0, bytes))
      if (first && text !== "") {
        if (text.startsWith("\uFEFF")) text = text.slice(1)
        first = false
      }
      // A long line spans chunks: its pieces are appended (cheap), and split only where "\n" is.
      if (text.includes("\n")) {
        const parts = text.split("\n")
        parts[0] = pending + parts[0]!
        pending = parts.pop()!
        yield* parts
      } else pending += text
      if (bytes === 0) break
    }
    yield pending
  } finally {
    closeSync(fd)
  }
}

/** The items of memory.jsonl `file`, read line by line; stops at the first malformed line. */
export const officialJsonlFileItems = (
  file: string,
): Iterable<Result.Result<OfficialJsonlItem | undefined, MalformedJsonlLine>> => decodeLines(fileLines(file))

/** Reads memory.jsonl text as an Effect; all or nothing, failing with `MalformedJsonlLine`. */
export const parseOfficialJsonl = (text: string): Effect.Effect<ParsedOfficialJsonl, MalformedJsonlLine> =>
  Effect.suspend(() => Effect.fromResult(decodeOfficialJsonl(text)))

/** One entity as the official server writes it. */
export const entityLine = (entity: Entity): string =>
  JSON.stringify({
    type: "entity",
    name: entity.name,
    entityType: entity.entityType,
    observations: entity.observations,
  })

/** One relation as the official server writes it. */
export const relationLine = (relation: Relation): string =>
  JSON.stringify({ type: "relation", from: relation.from, to: relation.to, relationType: relation.relationType })

/** The whole graph as the official server writes memory.jsonl (no trailing newline). */
export const serializeOfficialJsonl = (graph: KnowledgeGraph): string =>
  [...graph.entities.map(entityLine), ...graph.relations.map(relationLine)].join("\n")
