/**
 * The daemon's own recent log lines, kept in memory for `get_recent_logs`.
 *
 * Owns a bounded ring of the last `capacity` lines (oldest evicted first), each cut to
 * `daemonLogLineCharsMax`. `layerRing` installs an Effect `Logger` that writes every log entry
 * to the ring beside the loggers already installed (stderr keeps its lines), and provides the
 * same ring as `DaemonLog`. Writing never blocks and never fails: it is an array push under the
 * single JavaScript thread. The default `DaemonLog` is an empty ring nothing writes to, so the
 * tool answers (with no lines) when the daemon did not install one.
 */
import { Cause, Context, Effect, Layer, Logger, type LogLevel, References } from "effect"

/** Lines the daemon keeps. */
export const daemonLogLinesMax = 1_000
/** Longest line kept, in UTF-16 code units; longer ones are cut and marked. */
export const daemonLogLineCharsMax = 4 * 1024

/** Longest annotation value kept, in UTF-16 code units (as JSON text for non-strings). */
export const annotationCharsMax = 1024

/** The levels a reader may ask for, least severe first. */
export const daemonLogLevels = ["trace", "debug", "info", "warning", "error", "fatal"] as const
export type DaemonLogLevel = (typeof daemonLogLevels)[number]

/** One log line. */
export interface DaemonLogLine {
  /** Numbered from 1 since the daemon started; a gap before the first kept line means eviction. */
  readonly seq: number
  readonly at: string
  readonly level: DaemonLogLevel
  readonly message: string
  readonly annotations?: Record<string, unknown>
  readonly cause?: string
}

/** Reads the recent log lines. */
export interface DaemonLogService {
  /** The last `limit` lines at `minimumLevel` or above, oldest first. */
  readonly recent: (options: {
    readonly limit: number
    readonly minimumLevel?: DaemonLogLevel
  }) => Effect.Effect<ReadonlyArray<DaemonLogLine>>
  /** Lines written since the daemon started (the ring keeps the last `capacity`). */
  readonly total: Effect.Effect<number>
  readonly capacity: number
}

/** The daemon log the tools read; by default an empty ring that nothing writes to. */
export const DaemonLog = Context.Reference<DaemonLogService>("mnemos/editor/DaemonLog", {
  defaultValue: () => makeLogRing(0).service,
})

const levelOf = (level: LogLevel.LogLevel): DaemonLogLevel => {
  switch (level) {
    case "Trace":
      return "trace"
    case "Debug":
      return "debug"
    case "Warn":
      return "warning"
    case "Error":
      return "error"
    case "Fatal":
      return "fatal"
    default:
      return "info"
  }
}

const cut = (text: string) =>
  text.length <= daemonLogLineCharsMax ? text : `${text.slice(0, daemonLogLineCharsMax)}… (cut)`

const textOf = (part: unknown): string => {
  if (typeof part === "string") return part
  try {
    return JSON.stringify(part) ?? String(part)
  } catch {
    return String(part)
  }
}

/** Annotations as kept: each value a JSON value whose text is at most `annotationCharsMax`. */
const boundedAnnotations = (annotations: Readonly<Record<string, unknown>>): Record<string, unknown> =>
  Object.fromEntries(
    Object.entries(annotations).map(([key, value]) => {
      if (typeof value === "string")
        return [key, value.length <= annotationCharsMax ? value : `${value.slice(0, annotationCharsMax)}… (cut)`]
      const text = textOf(value)
      return [key, text.length <= annotationCharsMax ? value : `${text.slice(0, annotationCharsMax)}… (cut)`]
    }),
  )

/** A ring of `capacity` lines and the logger that fills it. */
export const makeLogRing = (
  capacity: number,
): { readonly service: DaemonLogService; readonly logger: Logger.Logger<unknown, void> } => {
  const ring: Array<DaemonLogLine> = []
  let total = 0
  const logger = Logger.make<unknown, void>(({ message, logLevel, cause, fiber, date }) => {
    if (capacity === 0) return
    const parts = Array.isArray(message) ? message : [message]
    const annotations = fiber.getRef(References.CurrentLogAnnotations)
    ring.push({
      seq: ++total,
      at: date.toISOString(),
      level: levelOf(logLevel),
      message: cut(parts.map(textOf).join(" ")),
      ...(Object.keys(annotations).length > 0 ? { annotations: boundedAnnotations(annotations) } : {}),
      ...(cause.reasons.length > 0 ? { cause: cut(Cause.pretty(cause)) } : {}),
    })
    if (ring.length > capacity) ring.shift()
  })
  const service: DaemonLogService = {
    capacity,
    total: Effect.sync(() => total),
    recent: ({ limit, minimumLevel = "trace" }) =>
      Effect.sync(() => {
        const floor = daemonLogLevels.indexOf(minimumLevel)
        const kept = ring.filter((line) => daemonLogLevels.indexOf(line.level) >= floor)
        return kept.slice(Math.max(0, kept.length - limit))
      }),
  }
  return { service, logger }
}

/**
 * Keeps the last `capacity` log lines: adds the ring's logger to the installed ones and provides
 * the ring as `DaemonLog`.
 */
export const layerRing = (capacity: number = daemonLogLinesMax): Layer.Layer<never> =>
  Layer.unwrap(
    Effect.sync(() => {
      const { service, logger } = makeLogRing(capacity)
      return Layer.merge(Layer.succeed(DaemonLog, service), Logger.layer([logger], { mergeWithExisting: true }))
    }),
  )
