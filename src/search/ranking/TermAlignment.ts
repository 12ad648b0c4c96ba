/**
 * Soft term alignment: how well a record states what the query asks, word by word. Used to
 * re-rank the best candidates of a search (SearchIndex.ts), where records on the same topic as
 * the query share its subject words and differ in the fact they state.
 *
 * Words are the embedding tokenizer's, stop words dropped. Two words are similar by the best of:
 *   - the same word or the same S-stem: 1; the same WordNet lemma ("failing", "fails"): 0.95;
 *   - a WordNet relation of their lemmas (Lexicon.ts): synonym or derived form 0.8, similar 0.7,
 *     hyper-/hyponym 0.6;
 *   - the cosine of their word vectors (WordVectors.ts), rescaled so `cosineFloor` and below is 0.
 *
 *   coverage(d)  = Σ_q W_q · max_r sim(q, r) / Σ_q W_q          (every query word matched)
 *   precision(d) = Σ_r w_r · max_q sim(q, r) / Σ_r w_r          (the record says nothing else)
 *   alignment(d) = (1 − p) · coverage + p · precision,  × (1 − penalty) on a negation or number mismatch
 *
 * w is the word's SIF rarity weight (StaticModel.ts; unknown words 1). A query word's weight W_q is
 * w_q divided by how many candidates match it well (Σ of matches ≥ `localMatchMin`, at least 1):
 * a subject word that every same-topic candidate contains tells them apart less than a word only
 * one of them matches — inverse document frequency over the candidates.
 *
 * Mismatches: the query has a negation (not, no, never, without, n't) and the record none; or
 * both carry numbers and share none ("release 412" against "release 413").
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import type { StaticVocabulary } from "../embedding/StaticModel.ts"
import { staticModelFiles } from "../embedding/StaticModelManifest.ts"
import type { WordRelation } from "../embedding/WordNet.ts"
import type { WordVectors } from "../embedding/WordVectors.ts"
import { decodeLexicon, type Lexicon } from "../index/Lexicon.ts"
import { embeddingWords, sStem, stopWords } from "../index/Tokenizer.ts"

/** Constants of the alignment, chosen on the tune split of the retrieval set. */
export const alignment = {
  /** Cosines at or below this count as no similarity. */
  cosineFloor: 0.2,
  /** Weight of precision against coverage. */
  precisionShare: 0.3,
  /** A candidate matching a query word at least this well counts towards that word's candidate frequency. */
  localMatchMin: 0.7,
  sameLemma: 0.95,
  relations: {
    synonym: 0.8,
    derivation: 0.8,
    similar: 0.7,
    hypernym: 0.6,
    hyponym: 0.6,
    inflection: 0.95,
  } satisfies Record<WordRelation, number>,
  /** Factor lost on a negation or number mismatch. */
  negationPenalty: 0.2,
  numberPenalty: 0.2,
  /** Words of a query and of a record that take part (the rest of a long text is ignored). */
  queryWordsMax: 24,
  recordWordsMax: 96,
} as const

/** How one record aligns with the query. */
export interface Alignment {
  /** 0..1, penalties applied. */
  readonly score: number
  readonly coverage: number
  readonly precision: number
  readonly negationMismatch: boolean
  readonly numberMismatch: boolean
}

/** Aligns queries with candidate texts. */
export interface TermAligner {
  /**
   * The alignment of `query` with each of `texts`; query word weights are learned from the first
   * `weightsFrom` texts (the candidates being re-ranked).
   */
  readonly align: (query: string, texts: ReadonlyArray<string>, weightsFrom: number) => Array<Alignment>
}

const negations: ReadonlySet<string> = new Set(["not", "no", "never", "without", "cannot", "nor", "neither", "t"])
const isNumber = (word: string) => /^\p{N}+$/u.test(word)

interface Word {
  readonly text: string
  readonly stem: string
  readonly id: number | undefined
  /** The word's id and its base forms' ids (lemmas), for the lexicon. */
  readonly lemmas: ReadonlyArray<number>
  readonly weight: number
}

interface TextWords {
  readonly words: ReadonlyArray<Word>
  readonly negated: boolean
  readonly numbers: ReadonlySet<string>
}

/** Builds an aligner over a model's vocabulary, word vectors and lexicon. */
export const makeTermAligner = (vocabulary: StaticVocabulary, vectors: WordVectors, lexicon: Lexicon): TermAligner => {
  const wordOf = (text: string): Word => {
    const id = vocabulary.ids.get(text)
    return {
      text,
      stem: sStem(text),
      id,
      lemmas: id === undefined ? [] : [id, ...lexicon.baseForms(id)],
      weight: id === undefined ? 1 : vocabulary.weights[id]!,
    }
  }
  const textWords = (text: string, max: number): TextWords => {
    const all = embeddingWords(text)
    const seen = new Set<string>()
    const words: Array<Word> = []
    for (const word of all) {
      if (stopWords.has(word) || seen.has(word)) continue
      seen.add(word)
      words.push(wordOf(word))
      if (words.length >= max) break
    }
    return { words, negated: all.some((word) => negations.has(word)), numbers: new Set(all.filter(isNumber)) }
  }
  const lexical = (a: Word, b: Word): number => {
    let best = 0
    for (const x of a.lemmas)
      for (const y of b.lemmas) {
        if (x === y) return alignment.sameLemma
        const relation = lexicon.relation(x, y)
        if (relation !== undefined) best = Math.max(best, alignment.relations[relation])
      }
    return best
  }
  const similarity = (a: Word, b: Word): number => {
    if (a.text === b.text || a.stem === b.stem) return 1
    if (a.id === undefined || b.id === undefined) return 0
    const cosine = vectors.cosine(a.id, b.id)
    const rescaled =
      cosine <= alignment.cosineFloor ? 0 : (cosine - alignment.cosineFloor) / (1 - alignment.cosineFloor)
    return Math.max(rescaled, lexical(a, b))
  }

  return {
    align: (query, texts, weightsFrom) => {
      const asked = textWords(query, alignment.queryWordsMax)
      const records = texts.map((text) => textWords(text, alignment.recordWordsMax))
      // Pairs of known words recur across candidates: their similarity is computed once per query.
      const cache = new Map<number, number>()
      const similar = (a: Word, b: Word) => {
        if (a.id === undefined || b.id === undefined) return similarity(a, b)
        const key = a.id * vectors.words + b.id
        const known = cache.get(key)
        if (known !== undefined) return known
        const value = similarity(a, b)
        cache.set(key, value)
        return value
      }
      // best[d][i]: how well record d matches query word i; answered[d][j]: how well the query matches word j of d.
      const best = records.map(() => new Float64Array(asked.words.length))
      const answered = records.map((record) => new Float64Array(record.words.length))
      records.forEach((record, d) => {
        record.words.forEach((word, j) => {
          asked.words.forEach((other, i) => {
            const value = similar(other, word)
            if (value > best[d]![i]!) best[d]![i] = value
            if (value > answered[d]![j]!) answered[d]![j] = value
          })
        })
      })
      const weights = asked.words.map((word, i) => {
        let frequency = 0
        for (let d = 0; d < Math.min(weightsFrom, records.length); d++) {
          const match = best[d]![i]!
          if (match >= alignment.localMatchMin) frequency += match
        }
        return word.weight / Math.max(1, frequency)
      })
      const weightSum = weights.reduce((sum, weight) => sum + weight, 0)
      return records.map((record, d) => {
        let coverage = 0
        asked.words.forEach((_, i) => {
          coverage += weights[i]! * best[d]![i]!
        })
        coverage = weightSum === 0 ? 0 : coverage / weightSum
        let precision = 0
        let recordWeight = 0
        record.words.forEach((word, j) => {
          recordWeight += word.weight
          precision += word.weight * answered[d]![j]!
        })
        precision = recordWeight === 0 ? 0 : precision / recordWeight
        const negationMismatch = asked.negated && !record.negated
        const numberMismatch =
          asked.numbers.size > 0 && record.numbers.size > 0 && ![...asked.numbers].some((n) => record.numbers.has(n))
        const penalty =
          (negationMismatch ? alignment.negationPenalty : 0) + (numberMismatch ? alignment.numberPenalty : 0)
        const score = ((1 - alignment.precisionShare) * coverage + alignment.precisionShare * precision) * (1 - penalty)
        return { score, coverage, precision, negationMismatch, numberMismatch }
      })
    },
  }
}

/** Loads the aligner of the static model in `dir`, over its already read vocabulary and word vectors. */
export const loadTermAligner = (dir: string, vocabulary: StaticVocabulary, vectors: WordVectors): TermAligner =>
  makeTermAligner(vocabulary, vectors, decodeLexicon(readFileSync(join(dir, staticModelFiles.lexicon))))
