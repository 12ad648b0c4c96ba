/**
 * Text to tokens, for the full-text index and for the static embedding model.
 *
 * Words are runs of letters and digits (Unicode), lower-cased; identifiers are split at
 * camelCase boundaries ("createEntities" → "create", "entities") and at non-alphanumerics
 * ("search_nodes" → "search", "nodes"), because agents write both prose and code words.
 *
 * The full-text side additionally drops English stop words, keeps the whole identifier beside its
 * parts (so an exact identifier still matches best) and folds plurals with the conservative
 * S-stemmer (Harman 1991: "ies"→"y", "es"→"e", "s"→"" with its exceptions), so "migrations"
 * finds "migration".
 */

/** Longest word kept, in UTF-16 units; longer runs (hashes, base64) are cut. */
export const tokenLengthMax = 40
/** At most this many tokens are taken from one text (the rest is ignored for ranking). */
export const tokensPerTextMax = 4096

const wordPattern = /[\p{L}\p{N}]+/gu
const camelBoundary = /(?<=[\p{Ll}\p{N}])(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})/u
/** Both camelCase boundaries need an upper-case letter beside them: a run without one is one word. */
const upperCase = /\p{Lu}/u
const asciiOnly = /^[^\u0080-\uffff]*$/

/** English stop words ignored by the full-text index. */
export const stopWords: ReadonlySet<string> = new Set(
  (
    "a about above after again against all am an and any are as at be because been before being below between both " +
    "but by can could did do does doing down during each few for from further had has have having he her here hers " +
    "herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on " +
    "once only or other our ours ourselves out over own same she should so some such than that the their theirs them " +
    "themselves then there these they this those through to too under until up very was we were what when where " +
    "which while who whom why will with would you your yours yourself yourselves"
  ).split(" "),
)

/**
 * A visitor of words, given the caller's `state` rather than closing over it: the visitors are
 * module-level functions, not a closure made for each text. V8 keeps a closure's optimised code
 * only while some closure of it is alive, so one made per call was compiled again after every
 * full collection (docs/benchmarks.md, "Closures made for each call").
 */
type WordVisitor<S> = (word: string, whole: string | undefined, state: S) => boolean

/** Visits one alphanumeric run: lower-cased, cut at its camelCase boundaries (`parts`), each with the whole. */
const visitRun = <S>(
  run: string,
  parts: ReadonlyArray<string> | undefined,
  visit: WordVisitor<S>,
  state: S,
): boolean => {
  if (parts === undefined || parts.length === 1)
    return visit(run.toLowerCase().slice(0, tokenLengthMax), undefined, state)
  const whole = run.toLowerCase().slice(0, tokenLengthMax)
  for (const part of parts) if (!visit(part.toLowerCase().slice(0, tokenLengthMax), whole, state)) return false
  return true
}

const isAsciiAlphanumeric = (code: number) =>
  (code >= 97 && code <= 122) || (code >= 65 && code <= 90) || (code >= 48 && code <= 57)
const isAsciiUpper = (code: number) => code >= 65 && code <= 90
const isAsciiLower = (code: number) => code >= 97 && code <= 122

/**
 * `run.split(camelBoundary)` for an ASCII run, without the regex (whose `split` builds a regex
 * object and an array each call: a fifth of what the search thread allocated a document).
 */
const asciiCamelParts = (run: string): Array<string> => {
  const parts: Array<string> = []
  let start = 0
  for (let at = 1; at < run.length; at++) {
    const before = run.charCodeAt(at - 1)
    const here = run.charCodeAt(at)
    if (!isAsciiUpper(here)) continue
    const afterLowerOrDigit = isAsciiLower(before) || (before >= 48 && before <= 57)
    const acronymEnd = isAsciiUpper(before) && at + 1 < run.length && isAsciiLower(run.charCodeAt(at + 1))
    if (afterLowerOrDigit || acronymEnd) {
      parts.push(run.slice(start, at))
      start = at
    }
  }
  parts.push(run.slice(start))
  return parts
}

/**
 * Raw words of a text, in order: alphanumeric runs split at camelCase, each with its whole run.
 * ASCII text (most of it) is scanned by character codes, which allocates only the words; other
 * text goes through the Unicode patterns. Both give the same words (a property test holds them to
 * the patterns).
 */
const rawWords = <S>(text: string, visit: WordVisitor<S>, state: S): void => {
  if (asciiOnly.test(text)) {
    const length = text.length
    for (let at = 0; at < length; ) {
      while (at < length && !isAsciiAlphanumeric(text.charCodeAt(at))) at++
      if (at === length) return
      const start = at
      let upper = false
      for (; at < length; at++) {
        const code = text.charCodeAt(at)
        if (!isAsciiAlphanumeric(code)) break
        if (isAsciiUpper(code)) upper = true
      }
      const run = text.slice(start, at)
      if (!visitRun(run, upper ? asciiCamelParts(run) : undefined, visit, state)) return
    }
    return
  }
  wordPattern.lastIndex = 0
  for (let match = wordPattern.exec(text); match !== null; match = wordPattern.exec(text)) {
    const run = match[0]
    if (!visitRun(run, upperCase.test(run) ? run.split(camelBoundary) : undefined, visit, state)) return
  }
}

/** Words for the embedding model: every word, in order (stop words too; SIF weights them down). */
export const embeddingWords = (text: string): Array<string> => {
  const out: Array<string> = []
  forEachEmbeddingWord(text, pushWord, out)
  return out
}

const pushWord = (word: string, out: Array<string>): boolean => {
  out.push(word)
  return true
}

interface EmbeddingWalk<S> {
  readonly visit: (word: string, state: S) => boolean
  readonly state: S
  count: number
}

const visitEmbeddingWord = <S>(word: string, _whole: string | undefined, walk: EmbeddingWalk<S>): boolean =>
  walk.visit(word, walk.state) && ++walk.count < tokensPerTextMax

/** `embeddingWords` one at a time, with no array of them; `visit` (given `state`) returns false to stop. */
export const forEachEmbeddingWord = <S>(text: string, visit: (word: string, state: S) => boolean, state: S): void =>
  rawWords(text, visitEmbeddingWord, { visit, state, count: 0 })

/** The S-stemmer: folds English plurals only, so it rarely conflates different words. */
export const sStem = (word: string): string => {
  if (word.length <= 3 || !word.endsWith("s") || /\d/.test(word)) return word
  if (word.endsWith("ies") && !word.endsWith("eies") && !word.endsWith("aies")) return `${word.slice(0, -3)}y`
  if (word.endsWith("es") && !word.endsWith("aes") && !word.endsWith("ees") && !word.endsWith("oes"))
    return word.slice(0, -1)
  if (!word.endsWith("us") && !word.endsWith("ss")) return word.slice(0, -1)
  return word
}

/** Terms for the full-text index: stemmed, stop words dropped, identifiers kept whole too. */
export const fullTextTerms = (text: string): Array<string> => {
  const walk: FullTextWalk = { out: [], lastWhole: undefined }
  rawWords(text, visitFullTextWord, walk)
  return walk.out
}

interface FullTextWalk {
  readonly out: Array<string>
  lastWhole: string | undefined
}

const visitFullTextWord = (word: string, whole: string | undefined, walk: FullTextWalk): boolean => {
  const { out } = walk
  if (whole !== undefined && whole !== walk.lastWhole) {
    out.push(whole)
    walk.lastWhole = whole
  } else if (whole === undefined) walk.lastWhole = undefined
  if (!stopWords.has(word)) out.push(sStem(word))
  return out.length < tokensPerTextMax
}
