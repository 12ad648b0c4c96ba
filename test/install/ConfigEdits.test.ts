/**
 * The config editors as properties: for generated JSON documents (any indentation, other servers,
 * other keys) and generated Codex TOML documents (tables, comments, blank lines), adding the entry
 * changes nothing but the entry, and removing it again gives back the exact original text. And the
 * unified diff of `--dry-run`, applied as a patch, turns the old text into the new one.
 * fast-check prints the seed of a failure; `fc.assert(..., { seed, path })` replays it.
 */
import fc from "fast-check"
import { assert, describe, it } from "vitest"
import { parseJsonc, setAt, valueAt } from "../../src/install/JsoncEdit.ts"
import { unifiedDiff } from "../../src/install/TextDiff.ts"
import { editTomlServer, parseToml, serverIn } from "../../src/install/TomlEdit.ts"

const entry = {
  command: "/usr/bin/node",
  args: ["/opt/mnemos/dist/cli.js", "mcp", "--data-dir", "C:\\Users\\me\\mnemos"],
}

const key = fc
  .string({ minLength: 1, maxLength: 12 })
  .filter((k) => k !== "mnemos" && k !== "__proto__" && k !== "mcpServers")
const jsonValue = fc.jsonValue({ maxDepth: 3 })
const document = fc.record({
  before: fc.dictionary(key, jsonValue, { maxKeys: 4 }),
  servers: fc.option(
    fc.dictionary(key, fc.record({ command: fc.string(), args: fc.array(fc.string(), { maxLength: 3 }) }), {
      maxKeys: 3,
    }),
    {
      nil: undefined,
    },
  ),
  after: fc.dictionary(key, jsonValue, { maxKeys: 3 }),
  indent: fc.constantFrom(2, 4, "\t"),
  eol: fc.constantFrom("\n", "\r\n"),
})

/** Applies a unified diff to `text` (the test's own reading of the format). */
const applyPatch = (text: string, patch: string): string => {
  const lines = text === "" ? [] : text.replace(/\r?\n$/, "").split(/\r?\n/)
  const out: Array<string> = []
  let at = 0
  const patchLines = patch.split("\n").slice(2)
  for (let index = 0; index < patchLines.length; index++) {
    const header = /^@@ -(\d+),(\d+) \+\d+,\d+ @@$/.exec(patchLines[index]!)
    if (header === null) continue
    const start = Number(header[2]) === 0 ? Number(header[1]) : Number(header[1]) - 1
    while (at < start) out.push(lines[at++]!)
    for (index++; index < patchLines.length && !patchLines[index]!.startsWith("@@"); index++) {
      const line = patchLines[index]!
      if (line === "") continue
      if (line[0] === " ") {
        assert.strictEqual(lines[at], line.slice(1))
        out.push(lines[at++]!)
      } else if (line[0] === "-") {
        assert.strictEqual(lines[at], line.slice(1))
        at++
      } else if (line[0] === "+") out.push(line.slice(1))
    }
    index--
  }
  while (at < lines.length) out.push(lines[at++]!)
  return out.join("\n")
}

describe("JSON and JSONC", () => {
  it("adding then removing the entry gives back the original text; nothing else changes", () => {
    fc.assert(
      fc.property(document, ({ before, servers, after, indent, eol }) => {
        // Through JSON once: what a file can hold (-0 is written as 0).
        const value = JSON.parse(
          JSON.stringify({ ...before, ...(servers !== undefined ? { mcpServers: servers } : {}), ...after }),
        ) as Record<string, unknown>
        const original = JSON.stringify(value, null, indent).replace(/\n/g, eol) + eol
        const installed = setAt(original, ["mcpServers", "mnemos"], entry)
        const parsed = parseJsonc(installed)
        assert.strictEqual(parsed._tag, "Ok")
        if (parsed._tag !== "Ok") return
        assert.deepStrictEqual(valueAt(parsed, ["mcpServers", "mnemos"]), entry)
        assert.deepStrictEqual(JSON.parse(installed), {
          ...value,
          mcpServers: { ...(servers ?? {}), mnemos: entry },
        })
        if (eol === "\r\n") assert.notMatch(installed, /[^\r]\n/, "the file's line ending is kept")
        const removed = setAt(installed, ["mcpServers", "mnemos"], undefined)
        if (servers !== undefined && Object.keys(servers).length > 0) assert.strictEqual(removed, original)
        else assert.deepStrictEqual(JSON.parse(removed), { ...value, mcpServers: {} })
        // The diff, applied as a patch (lines compared without their line ending), gives the new text.
        const patched = applyPatch(original, unifiedDiff(original, installed, "a", "b"))
        assert.strictEqual(patched, installed.replace(/\r?\n$/, "").replace(/\r\n/g, "\n"))
      }),
      { numRuns: 200 },
    )
  })

  it("comments, trailing commas and inline objects around the edit survive", () => {
    const cases = [
      `{\n  // servers\n  "servers": {\n    "a": { "type": "http", "url": "u" }, // a's comment\n  },\n}\n`,
      `{\n  "servers": {\n    /* first */ "a": {\n      "command": "x"\n    } // last, no comma\n  }\n}\n`,
      `{ "servers": { "a": { "command": "x" } }, "other": [1, 2] }`,
      `{\n\t"servers": {}\n}\n`,
      `// only a comment\n{}\n`,
    ]
    for (const original of cases) {
      const installed = setAt(original, ["servers", "mnemos"], entry)
      for (const comment of original.match(/\/\/[^\n]*|\/\*.*?\*\//g) ?? []) assert.include(installed, comment)
      const parsed = parseJsonc(installed)
      assert.strictEqual(parsed._tag, "Ok", installed)
      if (parsed._tag === "Ok") assert.deepStrictEqual(valueAt(parsed, ["servers", "mnemos"]), entry)
      const removed = setAt(installed, ["servers", "mnemos"], undefined)
      const back = parseJsonc(removed)
      assert.strictEqual(back._tag, "Ok", removed)
      if (original.includes('"a"')) assert.strictEqual(removed, original)
    }
  })
})

const tomlKey = fc.stringMatching(/^[a-z][a-z0-9_]{0,8}$/).filter((k) => k !== "mnemos" && k !== "mcp_servers")
const tomlString = fc.string({ maxLength: 10 }).map((s) => JSON.stringify(s))
const tomlTable = fc.record({
  comment: fc.option(
    fc.string({ maxLength: 20 }).map((s) => `# ${s.replace(/[\r\n]/g, " ")}`),
    { nil: undefined },
  ),
  entries: fc.array(fc.tuple(tomlKey, tomlString), { maxLength: 3 }),
})
const tomlDocument = fc.record({
  root: fc.array(fc.tuple(tomlKey, tomlString), { maxLength: 3 }),
  servers: fc.dictionary(tomlKey, tomlTable, { maxKeys: 3 }),
  others: fc.dictionary(tomlKey, tomlTable, { maxKeys: 2 }),
  blank: fc.boolean(),
})

const renderTable = (
  header: string,
  table: { comment: string | undefined; entries: Array<[string, string]> },
  blank: boolean,
) => {
  const seen = new Set<string>()
  const rows = table.entries.filter(([k]) => !seen.has(k) && seen.add(k)).map(([k, v]) => `${k} = ${v}`)
  return [...(table.comment !== undefined ? [table.comment] : []), header, ...rows, ...(blank ? [""] : [])].join("\n")
}

describe("Codex TOML", () => {
  it("adding then removing the table gives back the original text; nothing else changes", () => {
    fc.assert(
      fc.property(tomlDocument, ({ root, servers, others, blank }) => {
        const seen = new Set<string>()
        const rootRows = root.filter(([k]) => !seen.has(k) && seen.add(k)).map(([k, v]) => `${k} = ${v}`)
        const original = `${[
          ...rootRows,
          ...Object.entries(servers).map(([name, table]) => renderTable(`[mcp_servers.${name}]`, table, blank)),
          ...Object.entries(others).map(([name, table]) => renderTable(`[${name}]`, table, blank)),
        ].join("\n")}\n`
        const before = parseToml(original)
        fc.pre(before._tag === "Ok") // a generated root key may collide with a table name
        const installed = editTomlServer(original, "mnemos", entry)
        assert.strictEqual(installed._tag, "Ok", installed._tag === "Refused" ? installed.message : "")
        if (installed._tag !== "Ok" || before._tag !== "Ok") return
        const after = parseToml(installed.text)
        assert.strictEqual(after._tag, "Ok")
        if (after._tag !== "Ok") return
        assert.deepStrictEqual(serverIn(after.value, "mnemos"), entry)
        const removed = editTomlServer(installed.text, "mnemos", undefined)
        assert.strictEqual(removed._tag, "Ok")
        if (removed._tag === "Ok") assert.strictEqual(removed.text.trimEnd(), original.trimEnd())
      }),
      { numRuns: 200 },
    )
  })
})
