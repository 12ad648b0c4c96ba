/**
 * Clipboard watch mode (seed 002's `toggle_clipboard_watch_mode`): while it is on, the daemon reads
 * the clipboard's text every `clipboardWatchIntervalMs` and keeps each new content — after the
 * privacy filter, cut at `clipboardWatchEntryCharsMax`, the last `clipboardWatchEntriesMax` — so an
 * agent sees what the person copied without asking each time. Off by default, and nothing of the
 * clipboard is read while it is off; it stops when turned off or when the process ends (the timer
 * never keeps a process alive). One watcher per process: the daemon's clipboard is one clipboard.
 */
import { Context, Effect } from "effect"
import { filterPrivate } from "../privacy/PrivacyFilter.ts"
import { ClipboardHost, type ClipboardHostInfo, readClipboard } from "./Clipboard.ts"

/** How often a watched clipboard is read. */
export const clipboardWatchIntervalMs = 1_000
/** Copies kept while watching (the oldest goes first). */
export const clipboardWatchEntriesMax = 20
/** Longest copy kept, in UTF-16 code units (the rest is cut, and the entry says so). */
export const clipboardWatchEntryCharsMax = 16 * 1024

/** One copy seen while watching. */
export interface ClipboardCopy {
  readonly at: string
  readonly content: string
  readonly chars: number
  readonly truncated: boolean
}

/** The watch mode's state. */
export interface ClipboardWatchState {
  readonly watching: boolean
  /** When watching began (while on). */
  readonly since?: string
  /** Copies seen, oldest first (kept after watching stops, until it starts again). */
  readonly copies: ReadonlyArray<ClipboardCopy>
  /** Why the last read failed, if it did (no clipboard tool, no display, ...). */
  readonly lastError?: string
}

/** The watcher: turn it on or off, and what it saw. */
export interface ClipboardWatcher {
  /** Turns watching on or off (`undefined`: the other way round); answers the new state. */
  readonly toggle: (on?: boolean) => Effect.Effect<ClipboardWatchState>
  readonly state: () => ClipboardWatchState
}

/** A watcher reading the clipboard of `host` (the process's by default). */
export const makeClipboardWatcher = (intervalMs = clipboardWatchIntervalMs): ClipboardWatcher => {
  let timer: ReturnType<typeof setInterval> | undefined
  let since: string | undefined
  let copies: Array<ClipboardCopy> = []
  let last: string | undefined
  let lastError: string | undefined
  let reading = false

  const readOnce = (host: ClipboardHostInfo) => {
    if (reading) return
    reading = true
    void Effect.runPromise(Effect.exit(readClipboard("text").pipe(Effect.provideService(ClipboardHost, host)))).then(
      (exit) => {
        reading = false
        if (timer === undefined) return // turned off meanwhile
        if (exit._tag === "Failure") {
          const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")
          const failure = error?._tag === "Fail" ? (error.error as { reason?: string; message?: string }) : undefined
          // An empty clipboard is no error: there is just nothing new.
          lastError = failure?.reason === "Empty" ? undefined : (failure?.message ?? "the clipboard could not be read")
          return
        }
        lastError = undefined
        const content = exit.value.content
        if (content === last) return
        last = content
        const kept = filterPrivate(content) as string
        copies.push({
          at: new Date().toISOString(),
          content: kept.slice(0, clipboardWatchEntryCharsMax),
          chars: kept.length,
          truncated: kept.length > clipboardWatchEntryCharsMax,
        })
        if (copies.length > clipboardWatchEntriesMax) copies = copies.slice(copies.length - clipboardWatchEntriesMax)
      },
    )
  }

  const state = (): ClipboardWatchState => ({
    watching: timer !== undefined,
    ...(since !== undefined && timer !== undefined ? { since } : {}),
    copies: [...copies],
    ...(lastError !== undefined ? { lastError } : {}),
  })

  const toggle = (on?: boolean) =>
    Effect.gen(function* () {
      const host = yield* ClipboardHost
      const wanted = on ?? timer === undefined
      if (wanted && timer === undefined) {
        copies = []
        last = undefined
        lastError = undefined
        since = new Date().toISOString()
        timer = setInterval(() => readOnce(host), intervalMs)
        timer.unref()
        readOnce(host) // what the clipboard holds now is the baseline, kept as the first copy
      } else if (!wanted && timer !== undefined) {
        clearInterval(timer)
        timer = undefined
        since = undefined
      }
      return state()
    })

  return { toggle, state }
}

/** The process's clipboard watcher. */
export const ClipboardWatch = Context.Reference<ClipboardWatcher>("mnemos/editor/ClipboardWatch", {
  defaultValue: () => makeClipboardWatcher(),
})
