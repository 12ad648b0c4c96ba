/**
 * Talking to a running Neovim over its msgpack-RPC socket, with the official `neovim` client.
 *
 * Which instance: the `--nvim` address the daemon was started with, else the `$NVIM` of the
 * daemon's environment (set inside Neovim's `:terminal`), else the instance of the most recent
 * focus datagram that carries a `server` (its `v:servername`), so the last focused editor wins.
 * Any local user can send a focus datagram, so an address from one is used only when it is a
 * Unix socket owned by the daemon's own user (Neovim's default `--listen` socket is): a forged
 * datagram cannot point the tools at someone else's socket or at a TCP port.
 *
 * Each call opens its own connection and closes it afterwards: the instance may change with
 * every focus, it may have quit, and nothing is left half-open. Connecting, each request and the
 * whole call have time limits; a Neovim that blocks (say, on a prompt) is a `Timeout`, never a
 * hung tool. The socket's bytes reach the client through a stream this module ends itself, so a
 * reset connection ends the call with an error instead of an unhandled rejection in the client.
 * The client gets a silent logger: its default one patches `console`.
 */
import { lstatSync } from "node:fs"
import { createConnection, type Socket } from "node:net"
import { PassThrough } from "node:stream"
import { Context, Effect, Schema, type Scope } from "effect"
import type { NeovimClient } from "neovim"
import { importPackage } from "../cli/PackageImport.ts"
import { lastNeovimFocus } from "./EditorFocus.ts"
import { makeRpcFramer } from "./NeovimFraming.ts"

/** How long connecting to a Neovim socket may take. */
export const neovimConnectTimeoutMs = 2_000
/** How long one request to Neovim may take. */
export const neovimRequestTimeoutMs = 5_000
/** Longest Neovim address accepted (a socket path, named pipe or host:port). */
export const neovimAddressBytesMax = 4 * 1024

/** How the daemon reaches Neovim. */
export interface NeovimSettings {
  /** The `--nvim` address; wins over everything else. */
  readonly address?: string
  /** The daemon's `$NVIM` (or legacy `$NVIM_LISTEN_ADDRESS`). */
  readonly environmentAddress?: string
  /** Whether `nvim_execute_lua` may run (off unless the daemon was started with `--nvim-allow-lua`). */
  readonly executeLuaEnabled: boolean
  /** Where `nvim_execute_lua` calls are audited (JSON lines), beside the daemon log. */
  readonly luaAuditFile?: string
}

/** The Neovim address `$NVIM` (or the legacy `$NVIM_LISTEN_ADDRESS`) names, if any. */
export const environmentAddressOf = (env: NodeJS.ProcessEnv): string | undefined => {
  const address = env.NVIM ?? env.NVIM_LISTEN_ADDRESS
  return address !== undefined && address !== "" ? address : undefined
}

/** The settings from the process environment alone: `$NVIM`, Lua off. */
export const settingsFromEnvironment = (env: NodeJS.ProcessEnv = process.env): NeovimSettings => {
  const environmentAddress = environmentAddressOf(env)
  return { executeLuaEnabled: false, ...(environmentAddress !== undefined ? { environmentAddress } : {}) }
}

/** The Neovim settings the tools use; by default `$NVIM` and the focus telemetry, Lua off. */
export const NeovimConfig = Context.Reference<NeovimSettings>("mnemos/editor/NeovimConfig", {
  defaultValue: () => settingsFromEnvironment(),
})

/** Why a Neovim call failed. */
export class NeovimError extends Schema.TaggedError<NeovimError>()("NeovimError", {
  reason: Schema.Literals(["NoInstance", "ConnectFailed", "NotNeovim", "Timeout", "RequestFailed", "BadReply"]),
  message: Schema.String,
}) {}

/** Where an address came from. */
export type NeovimAddressSource = "flag" | "environment" | "focus"

/** The instance a call goes to. */
export interface NeovimServer {
  readonly address: string
  readonly source: NeovimAddressSource
}

/**
 * Why a focus datagram's address is not used, or undefined when it may be: it must be a Unix
 * socket this process's user owns (a missing one is left to the connection to report).
 */
export const focusAddressProblem = (address: string, uid = process.getuid?.()): string | undefined => {
  if (process.platform === "win32" || uid === undefined) return undefined
  const advice = "focus datagrams can come from any local user; give it with --nvim or $NVIM to use it"
  if (tcpAddressOf(address) !== undefined) return `the focused Neovim's address ${address} is a TCP port: ${advice}`
  let owner: number
  try {
    owner = lstatSync(address).uid
  } catch {
    return undefined
  }
  return owner === uid
    ? undefined
    : `the focused Neovim's socket ${address} belongs to another user (uid ${owner}): ${advice}`
}

/** Finds the instance to talk to: `--nvim`, else `$NVIM`, else the last focused one. */
export const resolveServer: Effect.Effect<NeovimServer, NeovimError> = Effect.gen(function* () {
  const settings = yield* NeovimConfig
  if (settings.address !== undefined) return { address: settings.address, source: "flag" } as const
  if (settings.environmentAddress !== undefined)
    return { address: settings.environmentAddress, source: "environment" } as const
  const focus = yield* lastNeovimFocus
  if (focus?.server !== undefined) {
    const problem = focusAddressProblem(focus.server)
    if (problem !== undefined) return yield* new NeovimError({ reason: "NoInstance", message: problem })
    return { address: focus.server, source: "focus" } as const
  }
  return yield* new NeovimError({
    reason: "NoInstance",
    message:
      "no Neovim instance is known: start the daemon with --nvim <address>, run it with $NVIM set, or load scripts/nvim/mnemos-focus.lua in Neovim so it reports its focus and address",
  })
})

/** `host:port` for a TCP address, else undefined (a socket path or named pipe). */
const tcpAddressOf = (address: string): { host: string; port: number } | undefined => {
  const match = /^\[?([^/\\\]]+?)\]?:(\d{1,5})$/.exec(address)
  if (match === null) return undefined
  const port = Number(match[2])
  return port > 0 && port < 65_536 ? { host: match[1]!, port } : undefined
}

/** The `neovim` client numbers its requests from 2 (it increments before the first). */
const firstRequestId = 2

const silentLogger = {
  level: "error",
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
}

let neovimModule: Promise<typeof import("neovim")> | undefined
const loadNeovim = () => (neovimModule ??= importPackage<typeof import("neovim")>("neovim"))

const connectSocket = (address: string): Effect.Effect<Socket, NeovimError> =>
  Effect.callback<Socket, NeovimError>((resume) => {
    const tcp = tcpAddressOf(address)
    const socket = tcp === undefined ? createConnection(address) : createConnection(tcp.port, tcp.host)
    const timer = setTimeout(() => {
      socket.destroy()
      resume(
        Effect.fail(
          new NeovimError({
            reason: "Timeout",
            message: `Neovim at ${address} did not accept a connection within ${neovimConnectTimeoutMs} ms`,
          }),
        ),
      )
    }, neovimConnectTimeoutMs)
    socket.once("connect", () => {
      clearTimeout(timer)
      socket.removeAllListeners("error")
      socket.on("error", () => undefined) // reported through the reader's end
      resume(Effect.succeed(socket))
    })
    socket.once("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      socket.destroy()
      const gone = error.code === "ENOENT" || error.code === "ECONNREFUSED"
      resume(
        Effect.fail(
          new NeovimError({
            reason: "ConnectFailed",
            message: gone
              ? `no Neovim listens at ${address} (${error.code}); has that instance quit?`
              : `cannot connect to Neovim at ${address}: ${error.message}`,
          }),
        ),
      )
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      socket.destroy()
    })
  })

/** An open connection to one instance. */
export interface NeovimConnection {
  readonly server: NeovimServer
  /** Sends one request (`nvim_*` API function) and waits for its answer. */
  readonly request: (method: string, args: ReadonlyArray<unknown>) => Effect.Effect<unknown, NeovimError>
}

/** Connects to `server`; the connection closes with the scope. */
export const connect = (server: NeovimServer): Effect.Effect<NeovimConnection, NeovimError, Scope.Scope> =>
  Effect.gen(function* () {
    const { attach } = yield* Effect.promise(loadNeovim)
    const socket = yield* Effect.acquireRelease(connectSocket(server.address), (socket) =>
      Effect.sync(() => socket.destroy()),
    )
    // The client sees only checked answers to its own requests (see NeovimFraming.ts).
    let requestsWritten = 0
    const answered = new Set<number>()
    const frame = makeRpcFramer((id) => {
      const awaited = id >= firstRequestId && id < firstRequestId + requestsWritten && !answered.has(id)
      if (awaited) answered.add(id)
      return awaited
    })
    let refusal: string | undefined
    const reader = new PassThrough()
    socket.on("data", (chunk: Buffer) => {
      if (refusal !== undefined) return
      const framed = frame(chunk)
      if ("refused" in framed) {
        refusal = framed.refused
        socket.destroy()
        return
      }
      for (const message of framed.messages) reader.write(message)
    })
    socket.once("close", () => reader.end())
    const writer = {
      write: (chunk: Uint8Array) => {
        requestsWritten++
        return socket.write(chunk)
      },
      end: (done?: () => void) => socket.end(done),
    }
    const client: NeovimClient = attach({
      reader,
      writer: writer as unknown as NodeJS.WritableStream,
      options: { logger: silentLogger as never },
    })
    const request = (method: string, args: ReadonlyArray<unknown>) =>
      Effect.callback<unknown, NeovimError>((resume) => {
        const closed = () =>
          resume(
            Effect.fail(
              refusal === undefined
                ? new NeovimError({
                    reason: "ConnectFailed",
                    message: `Neovim at ${server.address} closed the connection`,
                  })
                : new NeovimError({
                    reason: "NotNeovim",
                    message: `${server.address} does not speak Neovim's RPC (it sent ${refusal}); is that address a Neovim?`,
                  }),
            ),
          )
        if (reader.readableEnded) return closed()
        reader.once("end", closed)
        client.request(method, [...args]).then(
          (value) => {
            reader.off("end", closed)
            resume(Effect.succeed(value))
          },
          (error: unknown) => {
            reader.off("end", closed)
            resume(
              Effect.fail(
                new NeovimError({
                  reason: "RequestFailed",
                  message: (error instanceof Error ? error.message : String(error)).replace(
                    /^nvim_\w+: (Error executing lua: )?/,
                    "",
                  ),
                }),
              ),
            )
          },
        )
        return Effect.sync(() => reader.off("end", closed))
      }).pipe(
        Effect.timeoutOrElse({
          duration: neovimRequestTimeoutMs,
          orElse: () =>
            Effect.fail(
              new NeovimError({
                reason: "Timeout",
                message: `Neovim at ${server.address} did not answer ${method} within ${neovimRequestTimeoutMs} ms (is it waiting at a prompt?)`,
              }),
            ),
        }),
      )
    return { server, request }
  })

/** Runs Lua in the instance (`nvim_exec_lua`); `...` in the chunk is `args`. */
export const execLua = (
  connection: NeovimConnection,
  code: string,
  args: ReadonlyArray<unknown>,
): Effect.Effect<unknown, NeovimError> => connection.request("nvim_exec_lua", [code, args])

/** Resolves the instance, connects, runs `use`, and closes the connection. */
export const withNeovim = <A, E, R>(
  use: (connection: NeovimConnection) => Effect.Effect<A, E, R>,
): Effect.Effect<A, E | NeovimError, Exclude<R, Scope.Scope>> =>
  Effect.scoped(
    Effect.gen(function* () {
      const server = yield* resolveServer
      const connection = yield* connect(server)
      return yield* use(connection)
    }),
  )
