/**
 * A one-line progress bar for long transfers, drawn on a terminal only (redrawn in place at most
 * every `redrawIntervalMs`); on a pipe or file it draws nothing, so logs stay clean.
 */
import type { TransferProgress } from "./ConversationTransfer.ts"

/** Least time between two redraws. */
const redrawIntervalMs = 100
/** Width of the bar, in characters. */
const barWidth = 30

/** A progress callback drawing on `stream` (when it is a terminal) and a `done` that ends the line. */
export const progressBar = (
  stream: NodeJS.WriteStream = process.stderr,
): { readonly update: TransferProgress; readonly done: () => void } => {
  let lastDrawMs = 0
  let drawn = false
  const update: TransferProgress = (phase, done, total) => {
    if (!stream.isTTY) return
    const now = Date.now()
    if (now - lastDrawMs < redrawIntervalMs && done < total) return
    lastDrawMs = now
    const fraction = total > 0 ? Math.min(1, done / total) : 0
    const filled = Math.round(fraction * barWidth)
    const unit = phase === "validating" || phase === "uploading" ? "bytes" : "records"
    stream.write(
      `\r${phase.padEnd(10)} [${"#".repeat(filled)}${"-".repeat(barWidth - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${done}/${total} ${unit}`,
    )
    drawn = true
  }
  return {
    update,
    done: () => {
      if (drawn) stream.write("\n")
      drawn = false
    },
  }
}
