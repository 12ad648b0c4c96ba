/**
 * The small pieces, by their own rules: search terms (CJK bigrams, normalisation), message ids
 * (strictly increasing across bursts and clock steps back), metadata patches, the bounded JSONL
 * line reader, UTF-8-safe truncation and the opaque cursors.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { Result } from "effect"
import fc from "fast-check"
import { decodeTime } from "ulid"
import { afterAll, describe, expect, it } from "vitest"
import { parseSessionKey, sessionKey } from "../../src/conversations/ConversationKeys.ts"
import { truncateUtf8 } from "../../src/conversations/ConversationReads.ts"
import { nextMessageId } from "../../src/conversations/ConversationStore.ts"
import { decodeCursor, encodeCursor } from "../../src/conversations/Cursor.ts"
import { readJsonlLines } from "../../src/conversations/JsonlLines.ts"
import { defaultMetadata, patchMetadata } from "../../src/conversations/Model.ts"
import { termsOf } from "../../src/conversations/Terms.ts"
import { removeTempDirs, tempDir } from "./engine.ts"

afterAll(removeTempDirs)

describe("termsOf", () => {
  it("lower-cases and NFKC-normalises words; splits on anything that is not a letter, mark, digit or underscore", () => {
    expect(termsOf("Hello, WORLD! snake_case x-y ＡＢＣ１２３ Café")).toEqual([
      "hello",
      "world",
      "snake_case",
      "x",
      "y",
      "abc123",
      "café",
    ])
  })
  it("turns runs of CJK into overlapping bigrams, a single character into itself", () => {
    expect(termsOf("データベース")).toEqual(["デー", "ータ", "タベ", "ベー", "ース"])
    expect(termsOf("DBの設計")).toEqual(["db", "の設", "設計"])
    expect(termsOf("字")).toEqual(["字"])
    expect(termsOf("한국어")).toEqual(["한국", "국어"])
  })
  it("cuts very long words", () => {
    expect(termsOf("a".repeat(100))).toEqual(["a".repeat(64)])
  })
})

describe("nextMessageId", () => {
  it("is strictly increasing in a burst within one millisecond, and across a clock step back", () => {
    const ids: Array<string> = []
    let last: string | undefined
    for (const now of [1000, 1000, 1000, 999, 500, 1001, 1001]) {
      last = nextMessageId(last, now)
      ids.push(last)
    }
    expect([...ids].sort()).toEqual(ids)
    expect(new Set(ids).size).toBe(ids.length)
    expect(decodeTime(ids[0]!)).toBe(1000)
    expect(decodeTime(ids[5]!)).toBe(1001)
  })
})

describe("patchMetadata", () => {
  it("replaces the given fields, keeps the others, and unsets summary/tool_call_id given as empty strings", () => {
    const full = patchMetadata(defaultMetadata, { summary: "s", tool_call_id: "t", tags: ["a"], importance: 9 })
    expect(full).toEqual({ ...defaultMetadata, tool_call_id: "t", tags: ["a"], importance: 9, summary: "s" })
    expect(patchMetadata(full, { importance: 10 })).toEqual({ ...full, importance: 10 })
    const cleared = patchMetadata(full, { summary: "", tool_call_id: "" })
    expect(cleared).not.toHaveProperty("summary")
    expect(cleared).not.toHaveProperty("tool_call_id")
  })
})

describe("readJsonlLines", () => {
  const file = (content: string | Buffer) => {
    const path = join(tempDir(), "lines.jsonl")
    writeFileSync(path, content)
    return path
  }
  it("numbers lines from 1, drops a \\r before \\n, and keeps a last line without \\n", () => {
    expect([...readJsonlLines(file("a\r\nbb\n\nccc"), 10)]).toEqual([
      { _tag: "Line", line: 1, text: "a", bytes: 1 },
      { _tag: "Line", line: 2, text: "bb", bytes: 2 },
      { _tag: "Line", line: 3, text: "", bytes: 0 },
      { _tag: "Line", line: 4, text: "ccc", bytes: 3 },
    ])
  })
  it("accepts a line of exactly the limit and stops at the first longer one, even one larger than a read", () => {
    expect([...readJsonlLines(file(`${"x".repeat(5)}\n`), 5)].map((line) => line._tag)).toEqual(["Line"])
    expect([...readJsonlLines(file(`ok\n${"x".repeat(6)}\nnever read\n`), 5)]).toEqual([
      { _tag: "Line", line: 1, text: "ok", bytes: 2 },
      { _tag: "TooLong", line: 2 },
    ])
    const huge = `${"y".repeat(3 * 1024 * 1024)}\n`
    expect([...readJsonlLines(file(huge), 1024)]).toEqual([{ _tag: "TooLong", line: 1 }])
  })
  it("reports bytes that are not UTF-8 by line", () => {
    expect([...readJsonlLines(file(Buffer.from([0x61, 0x0a, 0xc3, 0x28, 0x0a])), 10)]).toEqual([
      { _tag: "Line", line: 1, text: "a", bytes: 1 },
      { _tag: "NotUtf8", line: 2 },
    ])
  })
})

describe("truncateUtf8", () => {
  it("never splits a character", () => {
    expect(truncateUtf8("abc", 10)).toBe("abc")
    expect(truncateUtf8("aé", 2)).toBe("a")
    expect(truncateUtf8("😀😀", 5)).toBe("😀")
  })
})

describe("key components", () => {
  it("property: any project and session round-trip through keys that LMDB orders consistently", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 80 }),
        fc.string({ unit: "binary", maxLength: 80 }),
        (project, session) => {
          const key = sessionKey(1, project, session)
          expect(parseSessionKey(1, key)).toEqual({ project, session })
          // No character ordered-binary escapes (U+0000..U+0004), no lone surrogate.
          expect([...key].every((character) => character.charCodeAt(0) > 4)).toBe(true)
          expect(Buffer.from(key, "utf8").toString("utf8")).toBe(key)
        },
      ),
      { numRuns: 500 },
    )
  })
})

describe("cursors", () => {
  it("round-trip and refuse anything else", () => {
    const cursor = { v: 1, view: "history", session_id: "s", after: "01ARZ3NDEKTSV4RRFFQ69G5FAV" } as const
    expect(decodeCursor(encodeCursor(cursor))).toEqual(Result.succeed(cursor))
    for (const text of [
      "",
      "!!",
      encodeCursor({ v: 1, view: "sessions", after: "x" }).slice(1),
      Buffer.from('{"v":2}').toString("base64url"),
    ])
      expect(Result.isFailure(decodeCursor(text))).toBe(true)
  })
})
