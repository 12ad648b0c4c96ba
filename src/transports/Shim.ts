/**
 * `mnemos mcp`: what MCP clients launch. It proxies JSON-RPC between stdio and the daemon's
 * WebSocket endpoint for the same data directory, starting a detached daemon when none answers.
 *
 * Owns the upstream connection and two buffers: requests sent but not yet answered (`pending`,
 * in order) and other messages that could not be sent while the daemon was away (`queued`).
 * Invariants:
 * - Every client request is answered exactly once: answers are forwarded only for ids still
 *   pending, so an answer that arrives twice (a retry raced a late answer) is dropped.
 * - Every request is applied once: the connection carries a stable `client` id (random per shim
 *   process, so a restarted client is a new client), and the daemon keys each write by (client
 *   id, request id, the request) durably (tools/RetryKey.ts, stores/Idempotency.ts), so resending
 *   a pending request after a reconnect — even after the daemon crashed — cannot apply it twice.
 * - A request whose id is still pending is refused at once (-32600): JSON-RPC ids must be unique
 *   among pending requests, and answers are matched by id, so a second request under the same id
 *   could never be told apart from the first.
 * - After a reconnect the shim replays the MCP handshake (the client's initialize, under a shim
 *   id whose answer it swallows) before resending, so the new session is initialized as before.
 * - Buffers are bounded (`shimBufferedMessagesMax`); a request beyond the bound is answered with
 *   an error at once instead of growing memory.
 * - While the port is held by the daemon of another data directory (a setting waiting cannot fix),
 *   requests never sent to a daemon are answered with that error at once, instead of waiting
 *   unanswered; a request already sent keeps waiting for the daemon of its data directory, which
 *   may have applied it. The shim keeps looking, in case that port is freed.
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdirSync, openSync } from "node:fs"
import { join, resolve } from "node:path"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import WebSocket from "ws"
import { defaultHost, defaultPort, ping, readDaemonInfo, readToken } from "./Daemon.ts"
import { frameBytesHardMax } from "./WebSocketTransport.ts"

/** Most messages held while the daemon is unreachable. */
export const shimBufferedMessagesMax = 1024
/** Reconnect backoff bounds. */
export const reconnectDelayMsMin = 100
export const reconnectDelayMsMax = 5000
/** How long to wait for a daemon this shim started to answer /ping. */
export const daemonStartTimeoutMs = 20_000

/** How the shim is set up. */
export interface ShimConfig {
  readonly dataDir: string
  /** Where to look for (or start) the daemon when the data directory names none. */
  readonly host?: string
  readonly port?: number
  /** Start a daemon when none answers (default true). */
  readonly autoStart?: boolean
  readonly log?: (line: string) => void
}

type Id = string | number
const isRequest = (message: JSONRPCMessage): message is JSONRPCMessage & { id: Id; method: string } =>
  "method" in message && "id" in message
const isResponse = (message: JSONRPCMessage): message is JSONRPCMessage & { id: Id } =>
  !("method" in message) && "id" in message

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/** Runs the shim until the client closes stdin; resolves then. */
export const runShim = async (config: ShimConfig): Promise<void> => {
  const log = config.log ?? ((line: string) => process.stderr.write(`mnemos mcp: ${line}\n`))
  const clientId = randomBytes(16).toString("base64url")
  const stdio = new StdioServerTransport()
  const pending = new Map<Id, JSONRPCMessage & { id: Id }>()
  let queued: Array<JSONRPCMessage> = []
  let initialize: (JSONRPCMessage & { id: Id }) | undefined
  let initialized = false
  let upstream: WebSocket | undefined
  let connected = false
  let closed = false
  let handshakeId: string | undefined
  let handshakes = 0
  /** Ids of pending requests sent to a daemon at least once (it may have applied them). */
  const sent = new Set<Id>()
  /** Why no daemon of this data directory can be reached, when waiting cannot help. */
  let refusal: string | undefined

  const toClient = (message: JSONRPCMessage) => void stdio.send(message).catch(() => undefined)
  const refuse = (id: Id, message: string, code = -32000) => toClient({ jsonrpc: "2.0", id, error: { code, message } })
  const sendUp = (message: JSONRPCMessage) => upstream?.send(JSON.stringify(message))
  const sendRequest = (request: JSONRPCMessage & { id: Id }) => {
    sent.add(request.id)
    sendUp(request)
  }
  /** Answers every pending request no daemon has seen with `why`: nothing applied them. */
  const refuseUnsent = (why: string) => {
    for (const id of [...pending.keys()]) {
      if (sent.has(id)) continue
      pending.delete(id)
      refuse(id, why)
    }
    if (pending.size === 0) queued = []
  }

  const fromDaemon = (message: JSONRPCMessage) => {
    if (isResponse(message)) {
      if (message.id === handshakeId) {
        handshakeId = undefined
        sendUp({ jsonrpc: "2.0", method: "notifications/initialized" })
        for (const request of pending.values()) sendRequest(request)
        flushQueued()
        return
      }
      sent.delete(message.id)
      if (!pending.delete(message.id)) return // already answered once
      if (initialize !== undefined && message.id === initialize.id) initialized = true
    }
    toClient(message)
  }

  const flushQueued = () => {
    const messages = queued
    queued = []
    for (const message of messages) sendUp(message)
  }

  const onOpen = () => {
    connected = true
    refusal = undefined
    if (initialized && initialize !== undefined) {
      // A new session on the daemon: replay the handshake first, then resend what is pending.
      handshakeId = `mnemos-shim-handshake-${++handshakes}`
      sendUp({ ...initialize, id: handshakeId })
      return
    }
    for (const request of pending.values()) sendRequest(request)
    flushQueued()
  }

  stdio.onmessage = (message) => {
    if (isRequest(message)) {
      if (pending.has(message.id))
        return refuse(
          message.id,
          `request id ${JSON.stringify(message.id)} is already used by a request still waiting for its answer; ids must be unique among pending requests`,
          -32600,
        )
      if (refusal !== undefined && !connected) return refuse(message.id, refusal)
      if (message.method === "initialize") initialize = message
      if (pending.size + queued.length >= shimBufferedMessagesMax) {
        return refuse(
          message.id,
          `the mnemos daemon is unreachable and ${shimBufferedMessagesMax} messages are already waiting`,
        )
      }
      pending.set(message.id, message)
      if (connected && handshakeId === undefined) sendRequest(message)
      return
    }
    if (connected && handshakeId === undefined) return sendUp(message)
    if (queued.length < shimBufferedMessagesMax) queued.push(message)
  }

  const startDaemon = (host: string, port: number) => {
    mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
    const logFd = openSync(join(config.dataDir, "daemon.log"), "a", 0o600)
    const cli = resolve(process.argv[1] ?? "")
    const child = spawn(
      process.execPath,
      [...process.execArgv, cli, "serve", "--data-dir", config.dataDir, "--host", host, "--port", String(port)],
      {
        detached: true,
        stdio: ["ignore", logFd, logFd],
      },
    )
    child.unref()
    log(
      `started a daemon (pid ${child.pid}) for ${config.dataDir} on ${host}:${port}; its log is ${join(config.dataDir, "daemon.log")}`,
    )
  }

  /** Finds (or starts) the daemon of this data directory; undefined while it cannot be reached. */
  const locateDaemon = async (): Promise<{ host: string; port: number } | undefined> => {
    const recorded = readDaemonInfo(config.dataDir)
    const host = recorded?.host ?? config.host ?? defaultHost
    const port = recorded?.port ?? config.port ?? defaultPort
    const answer = await ping(host, port)
    // With --no-start the daemon may be remote (another machine's data directory): any mnemos answers.
    if (answer !== undefined && (answer.dataDir === config.dataDir || config.autoStart === false)) return { host, port }
    if (config.autoStart === false) return undefined
    const wanted = { host: config.host ?? defaultHost, port: config.port ?? defaultPort }
    const occupant = await ping(wanted.host, wanted.port)
    if (occupant !== undefined && occupant.dataDir !== config.dataDir) {
      const why = `port ${wanted.port} serves another data directory (${occupant.dataDir}); pass --port to use another`
      if (refusal === undefined) log(why)
      refusal = `the mnemos daemon for ${config.dataDir} cannot start: ${why}`
      refuseUnsent(refusal)
      return undefined
    }
    if (occupant === undefined) startDaemon(wanted.host, wanted.port)
    const deadline = Date.now() + daemonStartTimeoutMs
    while (Date.now() < deadline && !closed) {
      const ready = await ping(wanted.host, wanted.port)
      if (ready !== undefined && ready.dataDir === config.dataDir) return wanted
      await sleep(100)
    }
    return undefined
  }

  const connectOnce = async (): Promise<boolean> => {
    const target = await locateDaemon()
    if (target === undefined || closed) return false
    const token = readToken(config.dataDir)
    const socket = new WebSocket(
      `ws://${target.host.includes(":") ? `[${target.host}]` : target.host}:${target.port}/ws?client=${clientId}`,
      {
        maxPayload: frameBytesHardMax,
        headers: {
          host: `${target.host}:${target.port}`,
          ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
        },
      },
    )
    return new Promise((settle) => {
      socket.once("open", () => {
        upstream = socket
        onOpen()
        settle(true)
      })
      socket.on("message", (data) => {
        try {
          fromDaemon(JSON.parse(data.toString()) as JSONRPCMessage)
        } catch {
          log("dropped a frame from the daemon that is not JSON")
        }
      })
      socket.once("close", () => {
        if (upstream === socket) {
          upstream = undefined
          connected = false
          handshakeId = undefined
          if (!closed) void reconnect()
        }
        settle(false)
      })
      socket.once("error", () => undefined)
    })
  }

  let reconnecting = false
  const reconnect = async () => {
    if (reconnecting) return
    reconnecting = true
    for (let delay = reconnectDelayMsMin; !closed && !connected; delay = Math.min(reconnectDelayMsMax, delay * 2)) {
      if (await connectOnce()) break
      if (!closed) log(`daemon unreachable; retrying in ${delay} ms (${pending.size} request(s) waiting)`)
      await sleep(delay)
    }
    reconnecting = false
  }

  const finished = new Promise<void>((done) => {
    stdio.onclose = () => {
      closed = true
      upstream?.close()
      done()
    }
  })
  process.stdin.once("end", () => void stdio.close())
  await stdio.start()
  void reconnect()
  await finished
}
