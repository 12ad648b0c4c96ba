/**
 * How text becomes search terms, for messages and queries alike.
 *
 * Text is NFKC-normalised and lower-cased, then split into runs of letters, marks, digits and
 * underscores. A run of Han, Hiragana, Katakana or Hangul (which are written without spaces) gives
 * its overlapping character bigrams — a single character gives itself — so "データベース" matches
 * inside "データベースの設計"; any other run is one term. Terms longer than `termLengthMax` are cut.
 */

/** Longest term kept, in UTF-16 code units. */
export const termLengthMax = 64

const wordPattern = /[\p{L}\p{M}\p{N}_]+/gu
const spacelessScript = /[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}]/u

const pushRun = (out: Array<string>, run: string, spaceless: boolean) => {
  if (run === "") return
  if (!spaceless) {
    out.push(run.length > termLengthMax ? run.slice(0, termLengthMax) : run)
    return
  }
  const characters = [...run]
  if (characters.length === 1) out.push(characters[0]!)
  for (let index = 0; index + 1 < characters.length; index++) out.push(characters[index]! + characters[index + 1]!)
}

const asciiOnly = /^\p{ASCII}*$/u
const asciiWordPattern = /[a-z0-9_]+/g

/** The terms of `text`, in order, repeats included. */
export const termsOf = (text: string): Array<string> => {
  const out: Array<string> = []
  // ASCII needs neither normalisation nor the script checks (the common case, kept fast).
  if (asciiOnly.test(text)) {
    for (const match of text.toLowerCase().matchAll(asciiWordPattern)) pushRun(out, match[0], false)
    return out
  }
  const normalized = text.normalize("NFKC").toLowerCase()
  const anySpaceless = spacelessScript.test(normalized)
  for (const match of normalized.matchAll(wordPattern)) {
    const word = match[0]
    if (!anySpaceless || !spacelessScript.test(word)) {
      pushRun(out, word, false)
      continue
    }
    let run = ""
    let runSpaceless = false
    for (const character of word) {
      const spaceless = spacelessScript.test(character)
      if (run !== "" && spaceless !== runSpaceless) {
        pushRun(out, run, runSpaceless)
        run = ""
      }
      run += character
      runSpaceless = spaceless
    }
    pushRun(out, run, runSpaceless)
  }
  return out
}

/** The distinct terms of `text`. */
export const distinctTermsOf = (text: string): Array<string> => [...new Set(termsOf(text))]
