/**
 * Waiting for an output to take more: what a transport does once a write of it returned false
 * (StdioLines.ts) or once more than its mark waits to go out (StreamableHttpTransport.ts).
 */

/** An output's events this needs: a `Writable`, or an HTTP `ServerResponse`. */
interface Output {
  on(event: "drain" | "close" | "error", listener: () => void): unknown
  off(event: "drain" | "close" | "error", listener: () => void): unknown
}

const waiting = new WeakMap<Output, Promise<void>>()

/**
 * Resolves at `output`'s next "drain", or once it closes or fails (a closed output never drains):
 * one set of listeners however many wait.
 */
export const drained = (output: Output): Promise<void> => {
  let next = waiting.get(output)
  if (next === undefined) {
    next = new Promise((resolve) => {
      const done = () => {
        output.off("drain", done)
        output.off("close", done)
        output.off("error", done)
        waiting.delete(output)
        resolve()
      }
      output.on("drain", done)
      output.on("close", done)
      output.on("error", done)
    })
    waiting.set(output, next)
  }
  return next
}
