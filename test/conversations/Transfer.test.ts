/**
 * Backup: export → import is the identity (property), an import with one bad line changes nothing
 * and names the line, the seed's limits hold, policies reject/overwrite, and the import is all or
 * nothing across a crash (staged data is invisible until the commit; leftovers are discarded), and
 * a write made meanwhile is kept (ImportDuringWrites.test.ts tests every kind). The CLI runs on a
 * data directory no process owns.
 */
import { execFile } from "node:child_process"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { promisify } from "node:util"
import { Effect, Exit } from "effect"
import fc from "fast-check"
import { afterAll, describe, expect, it } from "vitest"
import { Router } from "../../src/actors/Router.ts"
import { importConversations } from "../../src/conversations/ConversationImport.ts"
import { conversationStore } from "../../src/conversations/ConversationStore.ts"
import {
  defaultImportLimits,
  exportConversations,
  type ImportLimits,
  TransferFailed,
} from "../../src/conversations/ConversationTransfer.ts"
import { currentGen, readImportState } from "../../src/conversations/Generations.ts"
import type { ConversationStoreHandle } from "../../src/conversations/Maintenance.ts"
import { readStats } from "../../src/conversations/MessageState.ts"
import { openEngine, removeTempDirs, type TestEngine, tempDir } from "./engine.ts"

afterAll(removeTempDirs)

const repoRoot = join(import.meta.dirname, "..", "..")
const run = promisify(execFile)

const storeOf = (engine: TestEngine) =>
  engine.run(
    Effect.gen(function* () {
      return (yield* Router).store(conversationStore) as ConversationStoreHandle
    }),
  )

const exportTo = async (engine: TestEngine, file: string, selection = {}, limits = defaultImportLimits) =>
  engine.run(exportConversations(await storeOf(engine), file, selection, limits))

const importFrom = async (
  engine: TestEngine,
  file: string,
  policy: "overwrite" | "reject" = "reject",
  limits: ImportLimits = defaultImportLimits,
  project?: string,
) =>
  engine.run(
    Effect.exit(importConversations(await storeOf(engine), file, { policy, ...(project ? { project } : {}) }, limits)),
  )

const failureOf = (exit: Exit.Exit<unknown, TransferFailed>): TransferFailed => {
  if (Exit.isSuccess(exit)) throw new Error("expected the import to fail")
  const reason = exit.cause.reasons.find((item) => item._tag === "Fail")
  if (reason === undefined || reason._tag !== "Fail") throw new Error(`not a failure: ${String(exit.cause)}`)
  return reason.error
}

/** Everything a reader can see, per session (history) plus the sessions view. */
const visibleState = async (engine: TestEngine) => {
  const sessions = (await engine.ok("read_messages", { view: "sessions", limit: 1000 })).json.sessions as Array<{
    session_id: string
  }>
  const histories: Record<string, unknown> = {}
  for (const session of sessions)
    histories[session.session_id] = (
      await engine.ok("read_messages", { session_id: session.session_id, limit: 1000 })
    ).json.history
  return { sessions, histories }
}

const fill = async (engine: TestEngine, count: number, session = "backup") => {
  const ids: Array<string> = []
  for (let index = 0; index < count; index++)
    ids.push(
      (
        await engine.ok("write_message", {
          session_id: `${session}-${index % 3}`,
          role: index % 2 === 0 ? "user" : "assistant",
          content: `message ${index}: "quoted"\nnew line ✓ データ`,
          metadata_json: JSON.stringify({
            tags: [`tag${index % 4}`],
            importance: index % 101,
            summary: `summary ${index}`,
          }),
        })
      ).json.message.message_id,
    )
  return ids
}

describe("export → import round trip", () => {
  const text = fc.oneof(
    fc.string({ unit: "grapheme", minLength: 1, maxLength: 30 }),
    fc.string({ unit: "binary", minLength: 1, maxLength: 30 }),
    fc.constantFrom('"', "\\", "\n", "\u2028", "\u0000", "😀", "データベース"),
  )
  const operation = fc.oneof(
    fc.record({
      op: fc.constant("write" as const),
      session: fc.constantFrom("a", "b", "セッション", "\u0001odd"),
      role: fc.constantFrom("user", "assistant", "system"),
      content: text,
      tags: fc.array(
        text.filter((tag) => Buffer.byteLength(tag) <= 128),
        { maxLength: 3 },
      ),
      importance: fc.integer({ min: 0, max: 100 }),
      kind: fc.constantFrom("conversation", "semantic", "summary"),
      summary: fc.option(text, { nil: undefined }),
      relate: fc.boolean(),
    }),
    fc.record({ op: fc.constant("update" as const), target: fc.nat(), content: text }),
    fc.record({ op: fc.constant("delete" as const), target: fc.nat() }),
  )

  it("property: export, import into an empty store, export again gives the same file and the same reads", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 25 }), async (operations) => {
        const source = await openEngine()
        const target = await openEngine()
        try {
          const ids: Array<string> = []
          for (const operation of operations) {
            if (operation.op === "write") {
              const metadata = {
                tags: operation.tags,
                importance: operation.importance,
                memory_kind: operation.kind,
                ...(operation.summary !== undefined ? { summary: operation.summary } : {}),
                ...(operation.relate && ids.length > 0
                  ? { relations: [{ type: "derived_from", message_id: ids[0] }] }
                  : {}),
              }
              const reply = await source.ok("write_message", {
                session_id: operation.session,
                role: operation.role,
                content: operation.content,
                metadata_json: JSON.stringify(metadata),
              })
              ids.push(reply.json.message.message_id)
            } else if (ids.length > 0) {
              const id = ids[operation.target % ids.length]!
              if (operation.op === "update")
                await source.call("update_message", { message_id: id, content: operation.content })
              else await source.ok("delete_message", { message_id: id })
            }
          }
          const first = join(source.dir, "first.jsonl")
          const second = join(target.dir, "second.jsonl")
          const exported = await exportTo(source, first)
          const imported = await target.run(importConversations(await storeOf(target), first, { policy: "reject" }))
          expect(imported.records).toBe(exported.records)
          await exportTo(target, second)
          expect(readFileSync(second, "utf8")).toBe(readFileSync(first, "utf8"))
          expect(await visibleState(target)).toEqual(await visibleState(source))
          const word = operations.find((operation) => operation.op === "write")?.content ?? "x"
          const search = (engine: TestEngine) =>
            engine.ok("search_messages", { query: word, limit: 100 }).then((reply) => reply.json)
          expect(await search(target)).toEqual(await search(source))
        } finally {
          await source.close()
          await target.close()
        }
      }),
      { numRuns: 12 },
    )
  })

  it("writes the versioned header and one line per live message; --session and --project select", async () => {
    const engine = await openEngine()
    try {
      const ids = await fill(engine, 6)
      await engine.ok("delete_message", { message_id: ids[0] })
      const file = join(engine.dir, "all.jsonl")
      expect((await exportTo(engine, file)).records).toBe(5)
      const lines = readFileSync(file, "utf8").split("\n")
      expect(lines[0]).toBe('{"format":"mnemos-conversations","version":1}')
      expect(lines.at(-1)).toBe("")
      const record = JSON.parse(lines[1]!)
      expect(Object.keys(record)).toEqual(["project", "created_by", "message"])
      expect(record.project).toBe("default")
      expect(record.message.message_id).toBe(ids[1])
      expect((await exportTo(engine, join(engine.dir, "one.jsonl"), { session: "backup-1" })).records).toBe(2)
      expect((await exportTo(engine, join(engine.dir, "none.jsonl"), { project: "elsewhere" })).records).toBe(0)
      const elsewhere = await openEngine()
      try {
        expect(Exit.isSuccess(await importFrom(elsewhere, file, "reject", defaultImportLimits, "moved"))).toBe(true)
        // The records went to project "moved", so the default project of this engine is empty.
        expect((await elsewhere.ok("read_messages", { view: "sessions" })).json.sessions).toEqual([])
      } finally {
        await elsewhere.close()
      }
    } finally {
      await engine.close()
    }
  })
})

describe("import validates every line before it writes anything", () => {
  const corruptions: Array<[string, (line: string) => string, RegExp]> = [
    ["not JSON", () => "{not json", /Expected a valid JSON string|JSON/],
    ["a bad role", (line) => line.replace('"role":"user"', '"role":"robot"'), /role/],
    [
      "a lower-case id",
      (line) => line.replace(/"message_id":"([0-9A-Z]{26})"/, (_, id: string) => `"message_id":"${id.toLowerCase()}"`),
      /ULID/,
    ],
    ["an unknown field", (line) => line.replace('{"project"', '{"extra":1,"project"'), /excess/],
    ["importance 101", (line) => line.replace(/"importance":\d+/, '"importance":101'), /between 0 and 100/],
    ["an empty content", (line) => line.replace(/"content":".*?データ"/, '"content":""'), /non-empty/],
    ["a missing message", () => '{"project":"default","created_by":"x"}', /message/],
  ]

  it.each(corruptions)(
    "a line with %s fails the import, names the line, and changes nothing",
    async (_, corrupt, why) => {
      const engine = await openEngine()
      try {
        await fill(engine, 5)
        const file = join(engine.dir, "backup.jsonl")
        await exportTo(engine, file)
        const fresh = await openEngine()
        try {
          await fill(fresh, 2, "existing")
          const before = await visibleState(fresh)
          const sequence = (await fresh.ok("get_system_health", {})).json.last_sequence
          const lines = readFileSync(file, "utf8").split("\n")
          lines[3] = corrupt(lines[3]!)
          const bad = join(fresh.dir, "bad.jsonl")
          writeFileSync(bad, lines.join("\n"))
          const failure = failureOf(await importFrom(fresh, bad, "overwrite"))
          expect(failure).toBeInstanceOf(TransferFailed)
          expect(failure.line).toBe(4)
          expect(failure.message).toMatch(/^line 4: /)
          expect(failure.message).toMatch(why)
          expect(await visibleState(fresh)).toEqual(before)
          expect((await fresh.ok("get_system_health", {})).json.last_sequence).toBe(sequence)
        } finally {
          await fresh.close()
        }
      } finally {
        await engine.close()
      }
    },
  )

  it("refuses a missing or foreign header, a repeated id, non-UTF-8 bytes and a line over 1 MiB + 4096 bytes", async () => {
    const engine = await openEngine()
    try {
      await fill(engine, 3)
      const file = join(engine.dir, "backup.jsonl")
      await exportTo(engine, file)
      const lines = readFileSync(file, "utf8").split("\n")
      const variant = (name: string, content: string | Buffer) => {
        const path = join(engine.dir, name)
        writeFileSync(path, content)
        return path
      }
      const cases: Array<[string, string | Buffer, number, RegExp]> = [
        ["empty.jsonl", "", 1, /empty/],
        ["header.jsonl", ['{"format":"mnemos-conversations","version":2}', ...lines.slice(1)].join("\n"), 1, /header/],
        ["official.jsonl", '{"type":"entity","name":"x","entityType":"y","observations":[]}\n', 1, /header/],
        ["twice.jsonl", [...lines.slice(0, 3), lines[1]!].join("\n"), 4, /appears twice \(first on line 2\)/],
        [
          "binary.jsonl",
          Buffer.concat([Buffer.from(`${lines[0]}\n${lines[1]}\n`), Buffer.from([0xff, 0xfe, 0x0a])]),
          3,
          /UTF-8/,
        ],
        [
          "long.jsonl",
          `${lines[0]}\n${lines[1]}\n${"x".repeat(defaultImportLimits.lineBytesMax + 1)}\n`,
          3,
          /longer than 1052672 bytes/,
        ],
      ]
      const fresh = await openEngine()
      try {
        for (const [name, content, line, why] of cases) {
          const failure = failureOf(await importFrom(fresh, variant(name, content)))
          expect(failure.line, name).toBe(line)
          expect(failure.message, name).toMatch(why)
        }
        expect((await fresh.ok("read_messages", { view: "sessions" })).json.sessions).toEqual([])
      } finally {
        await fresh.close()
      }
    } finally {
      await engine.close()
    }
  })

  it("accepts a line of exactly 1 MiB + 4096 bytes as far as length goes, and holds the record and byte limits", async () => {
    const engine = await openEngine()
    try {
      await fill(engine, 4)
      const file = join(engine.dir, "backup.jsonl")
      await exportTo(engine, file)
      const lines = readFileSync(file, "utf8").split("\n")
      // Exactly at the line limit: refused for its content (JSON), not for its length.
      const atLimit = join(engine.dir, "at-limit.jsonl")
      writeFileSync(atLimit, `${lines[0]}\n${"x".repeat(defaultImportLimits.lineBytesMax)}\n`)
      expect(failureOf(await importFrom(engine, atLimit)).message).not.toMatch(/longer than/)
      const fresh = await openEngine()
      try {
        const fewRecords = { ...defaultImportLimits, recordsMax: 3 }
        expect(failureOf(await importFrom(fresh, file, "reject", fewRecords)).message).toBe(
          "line 5: more than 3 records",
        )
        const fewBytes = { ...defaultImportLimits, decodedBytesMax: Buffer.byteLength(lines[1]!) + 10 }
        expect(failureOf(await importFrom(fresh, file, "reject", fewBytes)).message).toMatch(
          /^line 3: more than \d+ bytes of records$/,
        )
        const exactly = { ...defaultImportLimits, recordsMax: 4 }
        expect(Exit.isSuccess(await importFrom(fresh, file, "reject", exactly))).toBe(true)
      } finally {
        await fresh.close()
      }
    } finally {
      await engine.close()
    }
  })
})

describe("policies", () => {
  it("reject refuses a stored id (naming its line); overwrite replaces the stored message", async () => {
    const engine = await openEngine()
    try {
      const ids = await fill(engine, 3)
      const file = join(engine.dir, "backup.jsonl")
      await exportTo(engine, file)
      await engine.ok("update_message", { message_id: ids[1], content: "changed after the backup" })
      await engine.ok("write_message", { session_id: "backup-0", role: "user", content: "written after the backup" })
      const failure = failureOf(await importFrom(engine, file, "reject"))
      expect(failure.message).toBe(`line 2: message ${ids[0]} already exists (policy reject)`)
      expect(Exit.isSuccess(await importFrom(engine, file, "overwrite"))).toBe(true)
      const history = (await engine.ok("read_messages", { session_id: "backup-1" })).json.history
      expect(
        history.map((message: { content: string; revision: number }) => [message.content, message.revision]),
      ).toEqual([['message 1: "quoted"\nnew line ✓ データ', 1]])
      const session0 = (await engine.ok("read_messages", { session_id: "backup-0" })).json.history
      expect(session0.map((message: { content: string }) => message.content)).toContain("written after the backup")
      // A deleted message does not block reject: only live messages count.
      const other = await openEngine()
      try {
        await other.run(importConversations(await storeOf(other), file, { policy: "reject" }))
        await other.ok("delete_message", { message_id: ids[0] })
        expect(Exit.isSuccess(await importFrom(other, file, "reject"))).toBe(false)
        await other.ok("delete_message", { message_id: ids[1] })
        await other.ok("delete_message", { message_id: ids[2] })
        expect(Exit.isSuccess(await importFrom(other, file, "reject"))).toBe(true)
        expect((await other.ok("get_system_health", {})).json).toMatchObject({ active_messages: 3 })
      } finally {
        await other.close()
      }
    } finally {
      await engine.close()
    }
  })
})

describe("all or nothing", () => {
  const stage = async (engine: TestEngine, file: string) => {
    const store = await storeOf(engine)
    const lines = readFileSync(file, "utf8").trim().split("\n").slice(1)
    const records = lines.map((line) => JSON.parse(line))
    const base = await engine.run(store.read((view) => readStats(view, currentGen(view)).changes))
    await engine.run(store.send({ _tag: "BeginImport", import_id: "staged", base_changes: base }))
    for (let done = false; !done; )
      done = ((await engine.run(store.send({ _tag: "CopyChunk", import_id: "staged" }))) as { done: boolean }).done
    await engine.run(store.send({ _tag: "StageImport", import_id: "staged", policy: "overwrite", records }))
    return store
  }

  it("a crash after staging leaves the store as it was; the leftovers are discarded later", async () => {
    const source = await openEngine()
    const file = join(source.dir, "backup.jsonl")
    await fill(source, 5)
    await exportTo(source, file)
    await source.close()
    const engine = await openEngine()
    await fill(engine, 2, "mine")
    const before = await visibleState(engine)
    await stage(engine, file)
    expect(await visibleState(engine)).toEqual(before)
    await engine.close() // the process ends before the commit
    const reopened = await openEngine(engine.dir)
    try {
      expect(await visibleState(reopened)).toEqual(before)
      const store = await storeOf(reopened)
      expect((await reopened.run(store.read(readImportState)))?.phase).toBe("staging")
      await reopened.ok("rebuild_index", {})
      expect(await reopened.run(store.read(readImportState))).toBeUndefined()
      expect(
        await reopened.run(store.read((view) => [...view.getRange({ start: "g2\u0005", end: "g2\u0006" })].length)),
      ).toBe(0)
      expect(Exit.isSuccess(await importFrom(reopened, file))).toBe(true)
      expect((await reopened.ok("get_system_health", {})).json).toMatchObject({
        active_messages: 7,
        io: { replace_calls: 1 },
      })
    } finally {
      await reopened.close()
    }
  })

  it("a crash after the commit keeps the import; the old generation is dropped by the next maintenance", async () => {
    const source = await openEngine()
    const file = join(source.dir, "backup.jsonl")
    await fill(source, 4)
    await exportTo(source, file)
    await source.close()
    const engine = await openEngine()
    const store = await stage(engine, file)
    await engine.run(store.send({ _tag: "CommitImport", import_id: "staged" }))
    const after = await visibleState(engine)
    expect(Object.values(after.histories).flat()).toHaveLength(4)
    await engine.close()
    const reopened = await openEngine(engine.dir)
    try {
      expect(await visibleState(reopened)).toEqual(after)
      const reopenedStore = await storeOf(reopened)
      expect(await reopened.run(reopenedStore.read(readImportState))).toEqual({ phase: "dropping", gen: 1 })
      await reopened.ok("rebuild_index", {})
      expect(await reopened.run(reopenedStore.read(readImportState))).toBeUndefined()
      expect(
        await reopened.run(
          reopenedStore.read((view) => [...view.getRange({ start: "g1\u0005", end: "g1\u0006" })].length),
        ),
      ).toBe(0)
      expect(await visibleState(reopened)).toEqual(after)
    } finally {
      await reopened.close()
    }
  })

  it("a write during the import is kept by its commit, beside what was imported", async () => {
    const source = await openEngine()
    const file = join(source.dir, "backup.jsonl")
    await fill(source, 3)
    await exportTo(source, file)
    await source.close()
    const engine = await openEngine()
    try {
      const store = await stage(engine, file)
      await engine.ok("write_message", { session_id: "concurrent", role: "user", content: "written meanwhile" })
      await engine.run(store.send({ _tag: "CommitImport", import_id: "staged" }))
      const sessions = (await engine.ok("read_messages", { view: "sessions" })).json.sessions
      expect(sessions.map((session: { session_id: string }) => session.session_id).sort()).toEqual([
        "backup-0",
        "backup-1",
        "backup-2",
        "concurrent",
      ])
    } finally {
      await engine.close()
    }
  })
})

describe("export", () => {
  it("refuses (and leaves the old file alone) when a message would need a line longer than an import accepts", async () => {
    const engine = await openEngine()
    try {
      await engine.ok("write_message", { session_id: "q", role: "user", content: '"'.repeat(700 * 1024) })
      const file = join(engine.dir, "backup.jsonl")
      writeFileSync(file, "the previous backup\n")
      const exit = await engine.run(Effect.exit(exportConversations(await storeOf(engine), file, {})))
      expect(failureOf(exit).message).toMatch(/would need a line of \d+ bytes, more than the 1052672 an import accepts/)
      expect(readFileSync(file, "utf8")).toBe("the previous backup\n")
    } finally {
      await engine.close()
    }
  })
})

describe("the CLI", () => {
  const cli = (args: Array<string>) =>
    run(process.execPath, ["--import", "tsx", join(repoRoot, "src", "cli.ts"), ...args], { cwd: repoRoot }).then(
      (result) => ({ code: 0, ...result }),
      (error: { code: number; stdout: string; stderr: string }) => ({
        code: error.code,
        stdout: error.stdout,
        stderr: error.stderr,
      }),
    )

  // Each CLI run starts a process (seconds under load); --session, --project and overwrite are
  // covered above through the same functions.
  it("mnemos export --out / import --policy work on a data directory no process owns", {
    timeout: 300_000,
  }, async () => {
    const engine = await openEngine()
    await fill(engine, 5)
    const expected = await visibleState(engine)
    await engine.close()
    const file = join(tempDir(), "backup.jsonl")
    const exported = await cli(["export", "--out", file, "--data-dir", engine.dir])
    expect(exported).toMatchObject({ code: 0, stdout: `exported 5 conversation message(s) to ${file}\n` })
    const restored = tempDir()
    expect(await cli(["import", file, "--policy", "reject", "--data-dir", restored])).toMatchObject({
      code: 0,
      stdout: `imported 5 conversation message(s) from ${file} (policy reject)\n`,
    })
    const again = await cli(["import", file, "--data-dir", restored])
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/line 2: message \w{26} already exists \(policy reject\) \(nothing was imported\)/)
    const check = await openEngine(restored)
    try {
      expect(await visibleState(check)).toEqual(expected)
      // The data directory is owned now: the CLI refuses it and writes nothing.
      const refused = await cli(["export", "--out", join(restored, "refused.jsonl"), "--data-dir", restored])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toMatch(/in use|already open/)
      expect(existsSync(join(restored, "refused.jsonl"))).toBe(false)
    } finally {
      await check.close()
    }
  })
})
