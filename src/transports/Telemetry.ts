/**
 * Terminal and editor telemetry: what the shell just ran (`POST /terminal/telemetry`) and where
 * the editor's cursor is (UDP focus datagrams), offered to agents as the MCP resources
 * `memory://terminal/recent` and `memory://editor/active`.
 *
 * Owns, in memory only (deliberately not durable: it describes the present, and a restart
 * forgets it): a ring of the last `terminalEntriesMax` commands, the latest focus of each editor
 * session (at most `editorSessionsMax`, least recently focused evicted), and the counters shown
 * in `/api/stats`. Every input is decoded by the Schemas below; nothing else gets in. Each
 * accepted input publishes its resource's URI, so subscribed MCP sessions are told
 * (`notifications/resources/updated`); publishing never blocks (a sliding buffer per subscriber,
 * and a session coalesces what piled up into one notification).
 */

import { Context, Effect, Layer, PubSub, Result, Schema, type Scope } from "effect"
import { isMaxUtf8Bytes } from "../graph/Model.ts"
import { filterPrivate } from "../privacy/PrivacyFilter.ts"
import type { ResourceProvider } from "../tools/McpSession.ts"

/** Commands kept in the terminal ring. */
export const terminalEntriesMax = 200
/** Largest body `POST /terminal/telemetry` reads. */
export const terminalBodyBytesMax = 64 * 1024
/** Largest command line kept. */
export const commandBytesMax = 8 * 1024
/** Largest working directory path. */
export const cwdBytesMax = 4 * 1024
/** Largest output tail (the hooks send the last 4 KiB; this leaves room for multi-byte text). */
export const outputTailBytesMax = 16 * 1024
/** Largest shell or editor session id. */
export const sessionBytesMax = 256
/** Largest file path in a focus datagram. */
export const filePathBytesMax = 4 * 1024
/** Largest editor RPC address in a focus datagram (a socket path or host:port). */
export const serverAddressBytesMax = 1024
/** Editor sessions whose latest focus is kept. */
export const editorSessionsMax = 32
/** Undelivered change signals a subscriber may hold before the oldest are dropped (they coalesce anyway). */
export const changeSignalsMax = 16

/** The resource listing the recent shell commands. */
export const terminalRecentUri = "memory://terminal/recent"
/** The resource naming where the editor's cursor is. */
export const editorActiveUri = "memory://editor/active"

const boundedString = (bytesMax: number) => Schema.String.check(isMaxUtf8Bytes(bytesMax))
const nonEmptyBoundedString = (bytesMax: number) => Schema.String.check(Schema.isMinLength(1), isMaxUtf8Bytes(bytesMax))
const position = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 2 ** 31 - 1 }))

/** The body of `POST /terminal/telemetry`: one finished shell command. */
export const TerminalCommand = Schema.Struct({
  command: nonEmptyBoundedString(commandBytesMax),
  exit_code: Schema.Int.check(Schema.isBetween({ minimum: -(2 ** 31), maximum: 2 ** 31 - 1 })),
  cwd: boundedString(cwdBytesMax),
  output_tail: Schema.optionalKey(boundedString(outputTailBytesMax)),
  session: Schema.optionalKey(boundedString(sessionBytesMax)),
})
export type TerminalCommand = typeof TerminalCommand.Type

/**
 * One UDP focus datagram: a JSON object naming the file and cursor of an editor session, and
 * optionally the editor's RPC address (Neovim's `v:servername`), which the editor tools use.
 */
export const EditorFocus = Schema.Struct({
  file: nonEmptyBoundedString(filePathBytesMax),
  line: position,
  col: position,
  session: nonEmptyBoundedString(sessionBytesMax),
  server: Schema.optionalKey(boundedString(serverAddressBytesMax)),
})
export type EditorFocus = typeof EditorFocus.Type

/**
 * Seed 002's editor scripts name the session `session_id`; mnemos's own send `session`. A datagram
 * with only `session_id` is read as if it said `session` (one with both keeps `session`).
 */
export const withSessionAlias = (json: string): string => {
  try {
    const value: unknown = JSON.parse(json)
    if (typeof value !== "object" || value === null || Array.isArray(value)) return json
    const { session, session_id: sessionId, ...rest } = value as Record<string, unknown>
    if (session !== undefined || typeof sessionId !== "string") return json
    return JSON.stringify({ ...rest, session: sessionId })
  } catch {
    return json // not JSON: the decoder says so
  }
}

/** A focus datagram's bytes (UTF-8 JSON) as an `EditorFocus`. */
export const EditorFocusFromJson = Schema.fromJsonString(EditorFocus)

/** A kept command: what was sent, numbered and stamped on arrival. */
export interface TerminalEntry extends TerminalCommand {
  readonly seq: number
  readonly at: string
}

/** A kept focus, stamped on arrival. */
export interface FocusEntry extends EditorFocus {
  readonly at: string
}

/** What `memory://terminal/recent` holds. */
export interface TerminalRecent {
  readonly capacity: number
  /** Commands accepted since the daemon started (the ring keeps the last `capacity`). */
  readonly total: number
  /** Oldest first. */
  readonly entries: ReadonlyArray<TerminalEntry>
}

/** What `memory://editor/active` holds. */
export interface EditorActive {
  /** The most recent focus of any session, or null before the first. */
  readonly active: FocusEntry | null
  /** The latest focus of each session, most recent first. */
  readonly sessions: ReadonlyArray<FocusEntry>
}

/** Why a UDP datagram was dropped. */
export type DatagramDrop = "nonLoopback" | "oversized" | "invalid"

/** The counters in `/api/stats`. */
export interface TelemetryStats {
  readonly terminal: { readonly accepted: number; readonly invalid: number; readonly kept: number }
  readonly udp: {
    /** The port the focus listener is bound to, or null when it is not listening. */
    readonly port: number | null
    readonly received: number
    readonly accepted: number
    readonly droppedNonLoopback: number
    readonly droppedOversized: number
    readonly invalid: number
  }
}

/** An input that does not decode. */
export class TelemetryInvalid extends Schema.TaggedError<TelemetryInvalid>()("TelemetryInvalid", {
  message: Schema.String,
}) {}

/** The telemetry state of the daemon. */
export class Telemetry extends Context.Service<
  Telemetry,
  {
    /** Decodes and keeps one shell command. */
    readonly recordCommand: (input: unknown) => Effect.Effect<TerminalEntry, TelemetryInvalid>
    /** Decodes (from JSON text) and keeps one editor focus. */
    readonly recordFocus: (json: string) => Effect.Effect<FocusEntry, TelemetryInvalid>
    /** Counts a datagram as received. */
    readonly countReceived: Effect.Effect<void>
    /** Counts a datagram dropped before decoding. */
    readonly countDropped: (reason: Exclude<DatagramDrop, "invalid">) => Effect.Effect<void>
    /** Records where the focus listener is bound (null when it is not). */
    readonly setUdpPort: (port: number | null) => Effect.Effect<void>
    readonly terminalRecent: Effect.Effect<TerminalRecent>
    readonly editorActive: Effect.Effect<EditorActive>
    readonly stats: Effect.Effect<TelemetryStats>
    /** Signals (with the resource URI) every accepted command and focus. */
    readonly changes: Effect.Effect<PubSub.Subscription<string>, never, Scope.Scope>
  }
>()("mnemos/transports/Telemetry") {}

const firstLineOf = (message: string) => message.split("\n").slice(0, 6).join("; ")

/** Builds the in-memory telemetry state. */
export const makeTelemetry: Effect.Effect<Telemetry["Service"]> = Effect.gen(function* () {
  const changed = yield* PubSub.sliding<string>(changeSignalsMax)
  const ring: Array<TerminalEntry> = []
  const sessions = new Map<string, FocusEntry>() // insertion order = least recently focused first
  const counters = { accepted: 0, invalid: 0 }
  const udp = { port: null as number | null, received: 0, accepted: 0, nonLoopback: 0, oversized: 0, invalid: 0 }

  const decodeCommand = Schema.decodeUnknownResult(TerminalCommand)
  const decodeFocus = Schema.decodeUnknownResult(EditorFocusFromJson)

  const recordCommand = (input: unknown) =>
    Effect.suspend(() => {
      // Shell commands and their output are where secrets show up most: filter before keeping them.
      const decoded = decodeCommand(filterPrivate(input))
      if (Result.isFailure(decoded)) {
        counters.invalid++
        return Effect.fail(new TelemetryInvalid({ message: firstLineOf(decoded.failure.message) }))
      }
      const entry: TerminalEntry = { seq: ++counters.accepted, at: new Date().toISOString(), ...decoded.success }
      ring.push(entry)
      if (ring.length > terminalEntriesMax) ring.shift()
      return PubSub.publish(changed, terminalRecentUri).pipe(Effect.as(entry))
    })

  const recordFocus = (json: string) =>
    Effect.suspend(() => {
      const decoded = decodeFocus(withSessionAlias(json))
      if (Result.isFailure(decoded)) {
        udp.invalid++
        return Effect.fail(new TelemetryInvalid({ message: firstLineOf(decoded.failure.message) }))
      }
      udp.accepted++
      const entry: FocusEntry = { at: new Date().toISOString(), ...decoded.success }
      sessions.delete(entry.session)
      sessions.set(entry.session, entry)
      if (sessions.size > editorSessionsMax) sessions.delete(sessions.keys().next().value!)
      return PubSub.publish(changed, editorActiveUri).pipe(Effect.as(entry))
    })

  return Telemetry.of({
    recordCommand,
    recordFocus,
    countReceived: Effect.sync(() => {
      udp.received++
    }),
    countDropped: (reason) =>
      Effect.sync(() => {
        udp[reason]++
      }),
    setUdpPort: (port) =>
      Effect.sync(() => {
        udp.port = port
      }),
    terminalRecent: Effect.sync(() => ({ capacity: terminalEntriesMax, total: counters.accepted, entries: [...ring] })),
    editorActive: Effect.sync(() => {
      const recentFirst = [...sessions.values()].reverse()
      return { active: recentFirst[0] ?? null, sessions: recentFirst }
    }),
    stats: Effect.sync(() => ({
      terminal: { accepted: counters.accepted, invalid: counters.invalid, kept: ring.length },
      udp: {
        port: udp.port,
        received: udp.received,
        accepted: udp.accepted,
        droppedNonLoopback: udp.nonLoopback,
        droppedOversized: udp.oversized,
        invalid: udp.invalid,
      },
    })),
    changes: PubSub.subscribe(changed),
  })
})

/** The telemetry service, fresh and empty. */
export const layer: Layer.Layer<Telemetry> = Layer.effect(Telemetry, makeTelemetry)

/** The two telemetry resources, for every MCP session of the daemon. */
export const telemetryResources = (telemetry: Telemetry["Service"]): ReadonlyArray<ResourceProvider> => {
  return [
    {
      resource: {
        uri: terminalRecentUri,
        name: "terminal-recent",
        title: "Recent terminal commands",
        description: `The last ${terminalEntriesMax} shell commands reported by the shell hooks (command, exit code, cwd, output tail), oldest first. In memory only.`,
        mimeType: "application/json",
      },
      read: telemetry.terminalRecent,
      changes: telemetry.changes,
    },
    {
      resource: {
        uri: editorActiveUri,
        name: "editor-active",
        title: "Active editor location",
        description:
          "Where the editor's cursor is (file, line, col) as reported by editor focus datagrams: the latest of any session, and the latest of each session.",
        mimeType: "application/json",
      },
      read: telemetry.editorActive,
      changes: telemetry.changes,
    },
  ]
}
