/**
 * Import and export round trips through the commands: the full archive of every store (restored
 * into an empty data directory, the stores read back identically: a second export is the same file
 * but for its date), the official memory.jsonl, and the conversations backup. And what an archive
 * import refuses — a data directory that is not empty, a changed or cut-short file, a hand-edited
 * file whose checksum was recomputed but whose values have the wrong types or do not match their
 * keys — importing nothing.
 */
import { createHash } from "node:crypto"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import { exportCommand, importCommand } from "../../src/cli/TransferCommands.ts"
import { openTestEngine, removeTempDirs, runCommand, tempDir } from "./support.ts"

afterAll(removeTempDirs)

/** A data directory with records in the graph, the conversations and the engineering stores. */
const populated = async (): Promise<string> => {
  const dir = tempDir("mnemos-data-")
  const engine = await openTestEngine(dir)
  try {
    await engine.ok("create_entities", {
      entities: [
        { name: "Ada", entityType: "person", observations: ["wrote the first program", "ünïcödé ✓ \u{1F600}"] },
        { name: "Analytical Engine", entityType: "machine", observations: [] },
      ],
    })
    await engine.ok("create_relations", {
      relations: [{ from: "Ada", to: "Analytical Engine", relationType: "programmed" }],
    })
    await engine.ok("add_observations", { observations: [{ entityName: "Ada", contents: ["born 1815"] }] })
    for (let index = 0; index < 5; index++)
      await engine.ok("write_message", {
        session_id: `session-${index % 2}`,
        role: index % 2 === 0 ? "user" : "assistant",
        content: `message ${index}`,
        metadata_json: JSON.stringify({ tags: ["t"], summary: `summary ${index}`, importance: 60 + index }),
      })
    for (const [name, args] of [
      ["add_task", { title: "ship the archive" }],
      ["record_adr", { title: "Use LMDB", decision: "LMDB checkpoints", context: "fast reads" }],
      ["add_sticky_note", { content: "remember the milk" }],
    ] as const)
      await engine.call(name, args) // engineering tools, when present: more stores in the archive
  } finally {
    await engine.close()
  }
  return dir
}

/** An archive's header, entry lines and trailer (the header's date and so the checksum differ between exports). */
const parts = (archive: string) => {
  const lines = readFileSync(archive, "utf8").trimEnd().split("\n")
  return [JSON.parse(lines[0]!), lines.slice(1, -1), JSON.parse(lines[lines.length - 1]!)] as const
}

describe("the full archive (export --all, import)", () => {
  it("restores into an empty data directory identically", async () => {
    const source = await populated()
    const files = tempDir("mnemos-files-")
    const first = join(files, "first.jsonl")
    const exported = await runCommand(exportCommand, [first, "--all", "--data-dir", source])
    assert.isTrue(exported.ok, `${exported.stderr} ${exported.error?.message}`)
    assert.match(exported.stdout, /exported graph: \d+ entries/)
    assert.match(exported.stdout, /exported conversations: \d+ entries/)

    const target = tempDir("mnemos-data-")
    const imported = await runCommand(importCommand, [first, "--data-dir", target])
    assert.isTrue(imported.ok, `${imported.stderr} ${imported.error?.message}`)
    assert.match(imported.stdout, /imported \d+ entries of \d+ store\(s\)/)

    const second = join(files, "second.jsonl")
    const again = await runCommand(exportCommand, [second, "--all", "--data-dir", target])
    assert.isTrue(again.ok, again.stderr)
    const [headerA, entriesA, trailerA] = parts(first)
    const [headerB, entriesB, trailerB] = parts(second)
    assert.deepStrictEqual({ ...headerB, createdAt: "-" }, { ...headerA, createdAt: "-" })
    assert.isAbove(entriesA.length, 10)
    assert.deepStrictEqual(entriesB, entriesA, "every key and value of every store is the same, in the same order")
    assert.deepStrictEqual(trailerB.entries, trailerA.entries)

    // And the engine reads it back: the same graph, the same messages, searchable.
    const engine = await openTestEngine(target)
    try {
      const graph = JSON.parse((await engine.ok("read_graph", {})).text)
      assert.deepStrictEqual(graph.entities.map((entity: { name: string }) => entity.name).sort(), [
        "Ada",
        "Analytical Engine",
      ])
      assert.strictEqual(graph.relations.length, 1)
      const found = JSON.parse((await engine.ok("search_nodes", { query: "1815" })).text)
      assert.deepStrictEqual(
        found.entities.map((entity: { name: string }) => entity.name),
        ["Ada"],
      )
      const history = JSON.parse((await engine.ok("read_messages", { session_id: "session-0" })).text)
      assert.deepStrictEqual(
        history.history.map((message: { content: string }) => message.content),
        ["message 0", "message 2", "message 4"],
      )
      await engine.ok("create_entities", { entities: [{ name: "after restore", entityType: "t", observations: [] }] })
    } finally {
      await engine.close()
    }
  })

  it("refuses a data directory that is not empty, and imports nothing", async () => {
    const source = await populated()
    const archive = join(tempDir("mnemos-files-"), "all.jsonl")
    assert.isTrue((await runCommand(exportCommand, [archive, "--all", "--data-dir", source])).ok)
    const run = await runCommand(importCommand, [archive, "--data-dir", source])
    assert.isFalse(run.ok)
    assert.include(run.error?.message ?? "", "restores into an empty data directory only")
    assert.include(run.error?.message ?? "", "nothing was imported")
  })

  it("refuses a changed file, a file cut short and a file of unknown stores", async () => {
    const source = await populated()
    const files = tempDir("mnemos-files-")
    const archive = join(files, "all.jsonl")
    assert.isTrue((await runCommand(exportCommand, [archive, "--all", "--data-dir", source])).ok)
    const text = readFileSync(archive, "utf8")
    const lines = text.trimEnd().split("\n")

    const changed = join(files, "changed.jsonl")
    writeFileSync(changed, text.replace("born 1815", "born 1816"))
    const cut = join(files, "cut.jsonl")
    writeFileSync(cut, `${lines.slice(0, -2).join("\n")}\n`)
    const unknown = join(files, "unknown.jsonl")
    const header = JSON.parse(lines[0]!)
    const body = [JSON.stringify({ ...header, stores: [...header.stores, "no-such-store"] }), ...lines.slice(1, -1)]
    const hash = createHash("sha256")
    for (const line of body) hash.update(`${line}\n`)
    writeFileSync(
      unknown,
      `${[...body, JSON.stringify({ ...JSON.parse(lines[lines.length - 1]!), sha256: hash.digest("hex") })].join("\n")}\n`,
    )

    for (const [file, why] of [
      [changed, "checksum does not match"],
      [cut, "cut short"],
      [unknown, "no-such-store"],
    ] as const) {
      const target = tempDir("mnemos-data-")
      const run = await runCommand(importCommand, [file, "--data-dir", target])
      assert.isFalse(run.ok, file)
      assert.include(run.error?.message ?? "", why)
      assert.isFalse(existsSync(join(target, "stores", "graph", "lmdb")), "nothing was written")
    }
  })
})

/** `archive` with `edit` applied to its entries (null drops one), the counts and checksum made to match. */
const rewritten = (archive: string, target: string, edit: (entry: { s: string; k: string; v: unknown }) => unknown) => {
  const [header, lines] = parts(archive)
  const entries = lines.map((line) => edit(JSON.parse(line))).filter((entry): entry is { s: string } => entry !== null)
  const body = [JSON.stringify(header), ...entries.map((entry) => JSON.stringify(entry))]
  const hash = createHash("sha256")
  for (const line of body) hash.update(`${line}\n`)
  const counts: Record<string, number> = {}
  for (const entry of entries) counts[entry.s] = (counts[entry.s] ?? 0) + 1
  writeFileSync(
    target,
    `${[...body, JSON.stringify({ end: true, entries: counts, sha256: hash.digest("hex") })].join("\n")}\n`,
  )
  return target
}

describe("an archive edited by hand (its checksum recomputed)", () => {
  it("a wrong-typed value, a record that does not match its key, or a key the store has no place for: refused, nothing imported", async () => {
    const source = await populated()
    const files = tempDir("mnemos-files-")
    const archive = join(files, "all.jsonl")
    assert.isTrue((await runCommand(exportCommand, [archive, "--all", "--data-dir", source])).ok)
    const isEntity = (entry: { s: string; k: string }) => entry.s === "graph" && entry.k === "e\u0000default\u0000Ada"
    const edits: ReadonlyArray<readonly [string, (entry: { s: string; k: string; v: unknown }) => unknown, string]> = [
      [
        "observations-not-a-list",
        (entry) =>
          isEntity(entry) ? { ...entry, v: { ...(entry.v as object), observations: "wrote programs" } } : entry,
        "observations",
      ],
      [
        "entity-renamed",
        (entry) => (isEntity(entry) ? { ...entry, v: { ...(entry.v as object), name: "Grace" } } : entry),
        "its key says",
      ],
      [
        "task-title-a-number",
        (entry) =>
          entry.s === "tasks" && entry.k.startsWith("r\u001f")
            ? { ...entry, v: { ...(entry.v as object), data: { ...(entry.v as { data: object }).data, title: 42 } } }
            : entry,
        "title",
      ],
      [
        "message-content-a-number",
        (entry) => {
          const stored = entry.v as { message?: { content?: unknown } }
          return entry.s === "conversations" && stored?.message?.content !== undefined
            ? { ...entry, v: { ...stored, message: { ...stored.message, content: 7 } } }
            : entry
        },
        "content",
      ],
      [
        "unknown-key",
        (entry) => (isEntity(entry) ? { ...entry, k: "zz\u0000default\u0000Ada" } : entry),
        "no such key",
      ],
    ]
    for (const [name, edit, why] of edits) {
      const file = rewritten(archive, join(files, `${name}.jsonl`), edit)
      const target = tempDir("mnemos-data-")
      const run = await runCommand(importCommand, [file, "--data-dir", target])
      assert.isFalse(run.ok, `${name} was imported`)
      assert.include(run.error?.message ?? "", why, name)
      assert.include(run.error?.message ?? "", "nothing was imported", name)
      assert.isFalse(existsSync(join(target, "stores", "graph", "lmdb")), `${name}: nothing was written`)
    }
    // The same rewrite with no edit imports: the checks refuse edits, not rewritten files.
    const untouched = rewritten(archive, join(files, "untouched.jsonl"), (entry) => entry)
    const run = await runCommand(importCommand, [untouched, "--data-dir", tempDir("mnemos-data-")])
    assert.isTrue(run.ok, `${run.stderr} ${run.error?.message}`)
  })
})

describe("an archive that does not hold together (each entry well-formed, its checksum recomputed)", () => {
  it("a revision below 1, an index entry naming a missing entity or message, a record its index misses: refused naming the record, nothing imported", async () => {
    const source = await populated()
    const files = tempDir("mnemos-files-")
    const archive = join(files, "all.jsonl")
    assert.isTrue((await runCommand(exportCommand, [archive, "--all", "--data-dir", source])).ok)
    const isTask = (entry: { s: string; k: string }) => entry.s === "tasks" && entry.k.startsWith("r\u001f")
    // Ada was created first: her order entry is the project's first one.
    const adaOrder = "eo\u0000default\u000000000000000"
    const isHistory = (entry: { s: string; k: string }) =>
      entry.s === "conversations" && entry.k.split("\u0005")[1] === "h"
    const edits: ReadonlyArray<readonly [string, (entry: { s: string; k: string; v: unknown }) => unknown, string]> = [
      [
        "task-revision-negative",
        (entry) => (isTask(entry) ? { ...entry, v: { ...(entry.v as object), revision: -5 } } : entry),
        "revision",
      ],
      // The real entity loses its order entry to one naming nothing: it would vanish from read_graph.
      [
        "order-entry-names-a-missing-entity",
        (entry) => (entry.s === "graph" && entry.k === adaOrder ? { ...entry, v: "Nobody" } : entry),
        'entity "e/default/Ada": its order entry',
      ],
      [
        "history-entry-names-a-missing-message",
        (entry) => {
          if (!isHistory(entry)) return entry
          const parts = entry.k.split("\u0005")
          return { ...entry, k: [...parts.slice(0, -1), "01ZZZZZZZZZZZZZZZZZZZZZZZZ"].join("\u0005") }
        },
        "01ZZZZZZZZZZZZZZZZZZZZZZZZ",
      ],
      [
        "relation-without-its-incoming-entry",
        (entry) => (entry.s === "graph" && entry.k.startsWith("ri\u0000") ? null : entry),
        "programmed",
      ],
    ]
    for (const [name, edit, why] of edits) {
      const file = rewritten(archive, join(files, `${name}.jsonl`), edit)
      const target = tempDir("mnemos-data-")
      const run = await runCommand(importCommand, [file, "--data-dir", target])
      assert.isFalse(run.ok, `${name} was imported`)
      assert.include(run.error?.message ?? "", why, name)
      assert.include(run.error?.message ?? "", "nothing was imported", name)
      assert.isFalse(existsSync(join(target, "stores", "graph", "lmdb")), `${name}: nothing was put in place`)
    }
  })
})

describe("the other formats", () => {
  it("official memory.jsonl: export, import elsewhere, export again: the same file", async () => {
    const source = await populated()
    const files = tempDir("mnemos-files-")
    const first = join(files, "memory.jsonl")
    assert.isTrue((await runCommand(exportCommand, [first, "--format", "official-jsonl", "--data-dir", source])).ok)
    const target = tempDir("mnemos-data-")
    const imported = await runCommand(importCommand, [first, "--format", "official-jsonl", "--data-dir", target])
    assert.isTrue(imported.ok, imported.stderr)
    const second = join(files, "memory-again.jsonl")
    assert.isTrue((await runCommand(exportCommand, [second, "--format", "official-jsonl", "--data-dir", target])).ok)
    assert.strictEqual(readFileSync(second, "utf8"), readFileSync(first, "utf8"))
    assert.include(readFileSync(first, "utf8"), "ünïcödé ✓ \u{1F600}")
    // The import only wrote the stores (no index, no model: its memory stays the stores'); the
    // next engine's search catches up with them when it starts.
    assert.isFalse(existsSync(join(target, "search")))
    const engine = await openTestEngine(target)
    try {
      await engine.awaitSearchWarm()
      const found = await engine.ok("omni_search", { query: "first program", mode: "lexical" })
      assert.include(found.text, "wrote the first program")
    } finally {
      await engine.close()
    }
  })

  it("conversations backup: export, import elsewhere, export again: the same file", async () => {
    const source = await populated()
    const files = tempDir("mnemos-files-")
    const first = join(files, "conversations.jsonl")
    assert.isTrue((await runCommand(exportCommand, [first, "--data-dir", source])).ok)
    const target = tempDir("mnemos-data-")
    const imported = await runCommand(importCommand, [first, "--data-dir", target])
    assert.isTrue(imported.ok, `${imported.stderr} ${imported.error?.message}`)
    assert.include(imported.stdout, "imported 5 conversation message(s)")
    const second = join(files, "conversations-again.jsonl")
    assert.isTrue((await runCommand(exportCommand, [second, "--data-dir", target])).ok)
    assert.strictEqual(readFileSync(second, "utf8"), readFileSync(first, "utf8"))
  })
})
