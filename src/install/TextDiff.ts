/**
 * A unified diff of two versions of a config file, for `mnemos mcp install --dry-run`.
 *
 * Config files can be large (Claude Code's ~/.claude.json holds project history) while an edit
 * touches a few lines, so the common prefix and suffix are cut first and only the middle is
 * compared line by line (longest common subsequence, bounded by `middleLinesMax`; beyond it the
 * middle is shown as removed-then-added, which is still a correct diff).
 */

/** Lines of context around each change. */
const contextLines = 3
/** The changed middle is compared line by line up to this many lines on each side. */
const middleLinesMax = 2000

type DiffLine = { readonly tag: " " | "-" | "+"; readonly text: string }

const splitLines = (text: string): Array<string> => {
  if (text === "") return []
  const lines = text.split(/\r?\n/)
  if (lines[lines.length - 1] === "") lines.pop()
  return lines
}

const middleDiff = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Array<DiffLine> => {
  if (a.length > middleLinesMax || b.length > middleLinesMax)
    return [...a.map((text) => ({ tag: "-" as const, text })), ...b.map((text) => ({ tag: "+" as const, text }))]
  const table = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1))
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      table[i]![j] = a[i] === b[j] ? table[i + 1]![j + 1]! + 1 : Math.max(table[i + 1]![j]!, table[i]![j + 1]!)
  const out: Array<DiffLine> = []
  let i = 0
  let j = 0
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ tag: " ", text: a[i]! })
      i++
      j++
    } else if (table[i + 1]![j]! >= table[i]![j + 1]!) out.push({ tag: "-", text: a[i++]! })
    else out.push({ tag: "+", text: b[j++]! })
  }
  while (i < a.length) out.push({ tag: "-", text: a[i++]! })
  while (j < b.length) out.push({ tag: "+", text: b[j++]! })
  return out
}

/** The unified diff from `before` to `after` ("" when they are equal). */
export const unifiedDiff = (before: string, after: string, fromName: string, toName: string): string => {
  if (before === after) return ""
  const a = splitLines(before)
  const b = splitLines(after)
  let prefix = 0
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix++
  let suffix = 0
  while (
    suffix < a.length - prefix &&
    suffix < b.length - prefix &&
    a[a.length - 1 - suffix] === b[b.length - 1 - suffix]
  )
    suffix++
  const lines: Array<DiffLine> = [
    ...a.slice(0, prefix).map((text) => ({ tag: " " as const, text })),
    ...middleDiff(a.slice(prefix, a.length - suffix), b.slice(prefix, b.length - suffix)),
    ...a.slice(a.length - suffix).map((text) => ({ tag: " " as const, text })),
  ]
  // Line numbers (1-based) in `before` and `after` at each position of `lines`.
  const numberA: Array<number> = []
  const numberB: Array<number> = []
  let lineA = 1
  let lineB = 1
  for (const line of lines) {
    numberA.push(lineA)
    numberB.push(lineB)
    if (line.tag !== "+") lineA++
    if (line.tag !== "-") lineB++
  }
  const changes = lines.flatMap((line, index) => (line.tag === " " ? [] : [index]))
  const out = [`--- ${fromName}`, `+++ ${toName}`]
  let group = 0
  while (group < changes.length) {
    let last = group
    while (last + 1 < changes.length && changes[last + 1]! - changes[last]! <= contextLines * 2 + 1) last++
    const start = Math.max(0, changes[group]! - contextLines)
    const end = Math.min(lines.length, changes[last]! + 1 + contextLines)
    const hunk = lines.slice(start, end)
    const countA = hunk.filter((line) => line.tag !== "+").length
    const countB = hunk.filter((line) => line.tag !== "-").length
    const startA = countA === 0 ? numberA[start]! - 1 : numberA[start]!
    const startB = countB === 0 ? numberB[start]! - 1 : numberB[start]!
    out.push(`@@ -${startA},${countA} +${startB},${countB} @@`)
    for (const line of hunk) out.push(`${line.tag}${line.text}`)
    group = last + 1
  }
  return `${out.join("\n")}\n`
}
