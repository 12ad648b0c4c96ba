/**
 * The tokenizer's words, held to its definition: Unicode letter-and-digit runs, cut at camelCase
 * boundaries by the patterns below. Tokenizer.ts scans ASCII text by character codes instead (and
 * skips the cut for a run without an upper-case letter); on any text it must give what the patterns
 * give.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { embeddingWords, fullTextTerms, sStem, stopWords, tokenLengthMax } from "../../src/search/index/Tokenizer.ts"

const wordPattern = /[\p{L}\p{N}]+/gu
const camelBoundary = /(?<=[\p{Ll}\p{N}])(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})/u

/** The words by the patterns alone: each cut of a run, lower-cased, with the whole run when cut. */
const patternWords = (text: string): Array<readonly [string, string | undefined]> => {
  const words: Array<readonly [string, string | undefined]> = []
  for (const [run] of text.matchAll(wordPattern)) {
    const parts = run.split(camelBoundary)
    const whole = parts.length === 1 ? undefined : run.toLowerCase().slice(0, tokenLengthMax)
    for (const part of parts) words.push([part.toLowerCase().slice(0, tokenLengthMax), whole])
  }
  return words
}

const patternFullTextTerms = (text: string): Array<string> => {
  const out: Array<string> = []
  let lastWhole: string | undefined
  for (const [word, whole] of patternWords(text)) {
    if (whole !== undefined && whole !== lastWhole) {
      out.push(whole)
      lastWhole = whole
    } else if (whole === undefined) lastWhole = undefined
    if (!stopWords.has(word)) out.push(sStem(word))
  }
  return out
}

/** Texts rich in what the cut looks at: case changes, digits, acronyms, separators; some non-ASCII. */
const pieces = [
  "a",
  "B",
  "c",
  "XML",
  "Http",
  "z9",
  "7",
  "Q",
  "the",
  "Items",
  " ",
  "_",
  "-",
  ".",
  "\n",
  "ÉtÉ",
  "Σσ",
  "東京",
  "😀",
  "ǅ",
  "𝐀b",
]
const text = fc.oneof(
  { weight: 4, arbitrary: fc.array(fc.constantFrom(...pieces), { maxLength: 24 }).map((parts) => parts.join("")) },
  { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom(..."aAbBzZ09 _-.xX"), maxLength: 60 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }) },
)

describe("the tokenizer", () => {
  it("gives the words of its patterns, on ASCII and other text alike", () => {
    fc.assert(
      fc.property(text, (sample) => {
        expect(embeddingWords(sample)).toEqual(patternWords(sample).map(([word]) => word))
        expect(fullTextTerms(sample)).toEqual(patternFullTextTerms(sample))
      }),
      { numRuns: 3000 },
    )
  })

  it("cuts identifiers at camelCase and acronyms, keeping the whole beside the parts", () => {
    expect(embeddingWords("parseHTTPRequest createEntities v2Beta XMLHttp")).toEqual([
      "parse",
      "http",
      "request",
      "create",
      "entities",
      "v2",
      "beta",
      "xml",
      "http",
    ])
    expect(fullTextTerms("createEntities")).toEqual(["createentities", "create", "entity"])
  })
})
