/**
 * MCP over this process's stdin/stdout (embedded mode). stdout carries only JSON-RPC; logs go to
 * stderr. The session lasts until the client closes stdin or the process is asked to stop; no
 * line ends it (StdioLines.ts answers what it cannot take).
 */
import { Effect } from "effect"
import { type SessionOptions, startSession } from "../tools/McpSession.ts"
import type { SessionServices } from "../tools/Tool.ts"
import { StdioLineTransport } from "./StdioLines.ts"

/** Serves one MCP session on stdio; completes when the client disconnects. */
export const serveStdio = (options: Omit<SessionOptions, "transport">): Effect.Effect<void, never, SessionServices> =>
  Effect.scoped(
    Effect.gen(function* () {
      const transport = new StdioLineTransport()
      const closed = Effect.callback<void>((resume) => {
        const done = () => resume(Effect.void)
        process.stdin.once("end", done)
        process.stdin.once("close", done)
        transport.onclose = done
      })
      // The client started this process: its working directory is the client's.
      yield* startSession(transport, { workingDir: process.cwd(), ...options, transport: "stdio" })
      yield* closed
    }),
  )
