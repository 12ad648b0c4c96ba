/**
 * MCP over this process's stdin/stdout (embedded mode). stdout carries only JSON-RPC; logs go to
 * stderr. The session lasts until the client closes stdin or the process is asked to stop; no
 * line ends it (StdioLines.ts answers what it cannot take). When stdin ends, every request read
 * before its end is answered first: a script may write its requests and close stdin at once.
 */
import { Effect } from "effect"
import { type SessionOptions, startSession } from "../tools/McpSession.ts"
import type { SessionServices } from "../tools/Tool.ts"
import { inputEndGraceMs, StdioLineTransport } from "./StdioLines.ts"

/** Serves one MCP session on stdio; completes when the client disconnects. */
export const serveStdio = (options: Omit<SessionOptions, "transport">): Effect.Effect<void, never, SessionServices> =>
  Effect.scoped(
    Effect.gen(function* () {
      const transport = new StdioLineTransport()
      const closed = Effect.callback<void>((resume) => {
        const done = () => resume(Effect.void)
        let ended = false
        transport.onend = () => {
          ended = true
          void transport.whenAnswered(inputEndGraceMs).then((answered) => {
            if (!answered)
              process.stderr.write(
                `stdin closed: ${transport.unansweredCount()} request(s) still unanswered after ${inputEndGraceMs / 1000} s; shutting down without them\n`,
              )
            done()
          })
        }
        // Closed without an end (an error): nothing more can be read, nor perhaps written.
        process.stdin.once("close", () => {
          if (!ended) done()
        })
        transport.onclose = done
      })
      // The client started this process: its working directory is the client's.
      yield* startSession(transport, { workingDir: process.cwd(), ...options, transport: "stdio" })
      yield* closed
    }),
  )
