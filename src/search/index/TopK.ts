/**
 * The best `k` items of a stream under a total order, in O(n log k): a bounded binary heap whose
 * root is the worst item kept. Used where a query scores thousands of candidates but keeps 100.
 */
export class TopK<A> {
  private readonly heap: Array<A> = []

  /** `better(a, b)` is true when `a` ranks before `b`. */
  constructor(
    private readonly k: number,
    private readonly better: (a: A, b: A) => boolean,
  ) {}

  /** Offers an item; kept if it is among the best `k` so far. */
  push(item: A): void {
    const heap = this.heap
    if (this.k <= 0) return
    if (heap.length < this.k) {
      heap.push(item)
      let i = heap.length - 1
      while (i > 0) {
        const parent = (i - 1) >> 1
        if (!this.better(heap[parent]!, heap[i]!)) break
        ;[heap[parent], heap[i]] = [heap[i]!, heap[parent]!]
        i = parent
      }
      return
    }
    if (!this.better(item, heap[0]!)) return
    heap[0] = item
    let i = 0
    while (true) {
      const left = 2 * i + 1
      const right = left + 1
      let worst = i
      if (left < heap.length && this.better(heap[worst]!, heap[left]!)) worst = left
      if (right < heap.length && this.better(heap[worst]!, heap[right]!)) worst = right
      if (worst === i) break
      ;[heap[worst], heap[i]] = [heap[i]!, heap[worst]!]
      i = worst
    }
  }

  /** The worst item kept (the first to go), once any is kept. */
  worst(): A | undefined {
    return this.heap[0]
  }

  /** The items kept, best first. */
  sorted(): Array<A> {
    return [...this.heap].sort((a, b) => (this.better(a, b) ? -1 : this.better(b, a) ? 1 : 0))
  }
}
