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
 *   an error at once instead of growing memory. A line the daemon could not take (not JSON-RPC,
 *   longer than a WebSocket message may be) is answered here and never sent (StdioLines.ts).
 * - While waiting cannot help — the port is held by the daemon of another data directory, or the
 *   daemon refuses the connection (401 for a wrong token, 503 when every session is busy) — the
 *   shim says why on stderr and answers requests never sent to a daemon with that error at once,
 *   instead of leaving them unanswered; a request already sent keeps waiting for the daemon of
 *   its data directory, which may have applied it. The shim keeps trying, with backoff, and
 *   serves again as soon as a connection opens. It never hangs silently.
 */
import { randomBytes } from "node:crypto"
import type { IncomingMessage } from "node:http"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import WebSocket from "ws"
import { type DaemonSearch, type DaemonTarget, findOrStartDaemon, ping, readToken, shimLog } from "./Daemon.ts"
import { inputEndGraceMs, StdioLineTransport } from "./StdioLines.ts"
import { frameBytesHardMax } from "./WebSocketTransport.ts"

/** Most messages held while the daemon is unreachable. */
export const shimBufferedMessagesMax = 1024
/** Reconnect backoff bounds. */
export const reconnectDelayMsMin = 100
export const reconnectDelayMsMax = 5000
/** How long to wait for a daemon this shim started to answer /ping. */
export const daemonStartTimeoutMs = 20_000
/**
 * How often a shim that started a daemon asks it for /ping: a refused connection costs well under a
 * millisecond, and every poll period is added, half of it on average, to the first answer.
 */
export const daemonStartPollMs = 10
/** Most characters of a refusal's body repeated on stderr and to the client. */
const refusalCharsMax = 1024
/** Close codes of an orderly end (normal, going away, none, abnormal): not worth a line on stderr. */
const normalCloseCodes = new Set([1000, 1001, 1005, 1006])

/** The body of a refused upgrade (the daemon says why in it), cut to `refusalCharsMax`. */
const refusalText = (response: IncomingMessage): Promise<string> =>
  new Promise((resolve) => {
    let text = ""
    const done = () => resolve(text.trim().slice(0, refusalCharsMax) || (response.statusMessage ?? ""))
    response.setEncoding("utf8")
    response.on("data", (chunk: string) => {
      if (text.length < refusalCharsMax) text += chunk
    })
    response.once("end", done)
    response.once("error", done)
    response.once("close", done)
  })

/** How the shim is set up. */
export interface ShimConfig extends DaemonTarget {
  /**
   * The first search for the daemon, when the caller made it before loading the shim (so that a
   * daemon it started starts meanwhile); later ones the shim makes itself.
   */
  readonly firstSearch?: DaemonSearch
}

type Id = string | number
const isRequest = (message: JSONRPCMessage): message is JSONRPCMessage & { id: Id; method: string } =>
  "method" in message && "id" in message
const isResponse = (message: JSONRPCMessage): message is JSONRPCMessage & { id: Id } =>
  !("method" in message) && "id" in message

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

/** Runs the shim until the client closes stdin; resolves then. */
export const runShim = async (config: ShimConfig): Promise<void> => {
  const log = config.log ?? shimLog
  const clientId = randomBytes(16).toString("base64url")
  const stdio = new StdioLineTransport()
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
  /** The client closed its end: the shim ends once nothing it sent waits for an answer. */
  let inputEnded = false
  const closeWhenAnswered = () => {
    if (inputEnded && pending.size === 0) void stdio.close()
  }
  /** Why no daemon of this data directory can be reached, when waiting cannot help. */
  let refusal: string | undefined

  const toClient = (message: JSONRPCMessage) =>
    void stdio
      .send(message)
      .catch(() => undefined)
      .finally(closeWhenAnswered)
  const refuse = (id: Id, message: string, code = -32000) => toClient({ jsonrpc: "2.0", id, error: { code, message } })
  const sendUp = (message: JSONRPCMessage) => upstream?.send(JSON.stringify(message))
  const sendRequest = (request: JSONRPCMessage & { id: Id }) => {
    sent.add(request.id)
    sendUp(request)
  }
  /**
   * Waiting cannot help for now (`why`): says so on stderr (once per reason), answers every
   * pending request no daemon has seen with it (nothing applied them), and every new request
   * until a connection opens. A request already sent keeps waiting: its daemon may have applied it.
   */
  const refuseUnsent = (why: string) => {
    if (why !== refusal) log(`${why} (retrying every few seconds)`)
    refusal = why
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

  let firstSearch = config.firstSearch
  /** Finds (or starts) the daemon of this data directory; undefined while it cannot be reached. */
  const locateDaemon = async (): Promise<{ host: string; port: number } | undefined> => {
    const search = firstSearch ?? (await findOrStartDaemon({ ...config, log }))
    firstSearch = undefined
    if (search._tag === "Found") return search
    if (search._tag === "Absent") return undefined
    if (search._tag === "Occupied") {
      refuseUnsent(
        `the mnemos daemon for ${config.dataDir} cannot start: port ${search.port} serves another data directory (${search.occupant.dataDir}); pass --port to use another`,
      )
      return undefined
    }
    const deadline = Date.now() + daemonStartTimeoutMs
    while (Date.now() < deadline && !closed) {
      const ready = await ping(search.host, search.port)
      if (ready !== undefined && ready.dataDir === config.dataDir) return search
      await sleep(daemonStartPollMs)
    }
    return undefined
  }

  /** How one connection attempt ended. */
  type Attempt =
    | { readonly _tag: "Open" }
    | { readonly _tag: "Unreachable" }
    | { readonly _tag: "Refused"; readonly why: string }

  const connectOnce = async (): Promise<Attempt> => {
    const target = await locateDaemon()
    if (target === undefined || closed) return { _tag: "Unreachable" }
    const token = readToken(config.dataDir)
    const where = `${target.host.includes(":") ? `[${target.host}]` : target.host}:${target.port}`
    const socket = new WebSocket(`ws://${where}/ws?client=${clientId}`, {
      maxPayload: frameBytesHardMax,
      headers: {
        host: `${target.host}:${target.port}`,
        ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
        // The agent started the shim in its working directory: the daemon finds git context there
        // when the client offers no root.
        "x-mnemos-cwd": encodeURIComponent(process.cwd()),
      },
    })
    let carried = false
    return new Promise((settle) => {
      socket.once("open", () => {
        upstream = socket
        onOpen()
        settle({ _tag: "Open" })
      })
      // The daemon answered the upgrade with an HTTP error (401, 503, ...): say what it said.
      socket.once("unexpected-response", (_request, response) => {
        void refusalText(response).then((text) => {
          settle({
            _tag: "Refused",
            why: `the mnemos daemon at ${where} refused the connection: ${response.statusCode} ${text}`,
          })
          socket.terminate()
        })
      })
      socket.on("message", (data) => {
        carried = true
        delay = reconnectDelayMsMin
        try {
          fromDaemon(JSON.parse(data.toString()) as JSONRPCMessage)
        } catch {
          log("dropped a frame from the daemon that is not JSON")
        }
      })
      socket.once("close", (code, reason) => {
        if (upstream === socket) {
          upstream = undefined
          connected = false
          handshakeId = undefined
          if (!normalCloseCodes.has(code))
            log(`the mnemos daemon closed the connection: ${code} ${reason.toString() || "(no reason)"}`)
          // A connection that carried nothing does not reset the backoff: a daemon that accepts
          // and closes at once is not hammered.
          if (!closed) void reconnect(carried ? 0 : delay)
        }
        settle({ _tag: "Unreachable" })
      })
      socket.once("error", () => undefined)
    })
  }

  let delay = reconnectDelayMsMin
  let reconnecting = false
  /** Connects again until a connection opens, backing off while the daemon is away or refuses. */
  const reconnect = async (waitFirstMs = 0) => {
    if (reconnecting) return
    reconnecting = true
    if (waitFirstMs > 0) {
      await sleep(waitFirstMs)
      delay = Math.min(reconnectDelayMsMax, delay * 2)
    }
    while (!closed && !connected) {
      const attempt = await connectOnce()
      if (attempt._tag === "Open") break
      if (attempt._tag === "Refused") refuseUnsent(attempt.why)
      else if (!closed) log(`daemon unreachable; retrying in ${delay} ms (${pending.size} request(s) waiting)`)
      await sleep(delay)
      delay = Math.min(reconnectDelayMsMax, delay * 2)
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
  // The client's input ended: the requests it sent before are answered first, then the shim ends.
  stdio.onend = () => {
    inputEnded = true
    closeWhenAnswered()
    // A daemon that never answers (gone for good) does not keep the shim alive for ever.
    setTimeout(() => {
      if (pending.size > 0)
        log(`input ended: ${pending.size} request(s) still unanswered after ${inputEndGraceMs / 1000} s; exiting`)
      void stdio.close()
    }, inputEndGraceMs).unref()
  }
  await stdio.start()
  void reconnect()
  await finished
}
