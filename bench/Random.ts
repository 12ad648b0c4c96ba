/** Deterministic randomness for the benchmark corpora: the same seed gives the same workload. */

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export const seededRandom = (seed: number): (() => number) => {
  let state = seed >>> 0
  return (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Picks words Zipf-distributed (s = 1): the word of rank r has weight 1 / r. */
export const zipfSampler = <A>(vocabulary: ReadonlyArray<A>, random: () => number): (() => A) => {
  const cumulative: Array<number> = []
  let sum = 0
  for (let rank = 0; rank < vocabulary.length; rank++) {
    sum += 1 / (rank + 1)
    cumulative.push(sum)
  }
  return () => {
    const target = random() * sum
    let low = 0
    let high = cumulative.length - 1
    while (low < high) {
      const middle = (low + high) >>> 1
      if (cumulative[middle]! < target) low = middle + 1
      else high = middle
    }
    return vocabulary[low]!
  }
}
