/**
 * What the daemon's HTTP server lets a client take its time over, and JSON in and out.
 *
 * - Headers: a request's header block must arrive whole within `httpHeadersTimeoutMs` (node's
 *   `headersTimeout`, checked every `httpConnectionsCheckMs`); a connection that sends no request
 *   at all is cut the same way.
 * - Bodies: a request body has `httpBodyGraceMs`, and beyond that must have come in at least at
 *   `httpBodyBytesPerSecondMin` on average (`guardBodyArrival`); otherwise it is answered 408 (if
 *   nothing was answered yet) and its connection closed. A rate rather than a fixed deadline: the
 *   conversations import may upload gigabytes, and a body that trickles in a byte a second must
 *   not hold a socket for ever. Streams are not requests: an SSE or Streamable HTTP GET stream, or
 *   a long POST answer, are the response, and no limit here applies to them.
 * - JSON bodies are at most `httpBodyBytesMax` (413) and must parse (400 with -32700).
 */
import type { IncomingMessage, ServerResponse } from "node:http"

/** Largest HTTP request body accepted as JSON. */
export const httpBodyBytesMax = 16 * 1024 * 1024
/** How long a request's headers may take to arrive. */
export const httpHeadersTimeoutMs = 20_000
/** How often node looks for requests past their header deadline. */
export const httpConnectionsCheckMs = 5_000
/** How long any request body may take, whatever its size. */
export const httpBodyGraceMs = 30_000
/** The slowest average rate a body may arrive at after the grace (64 KiB/s: 16 MiB in about 4 min). */
export const httpBodyBytesPerSecondMin = 64 * 1024
/** How long a connection cut for a slow body gets to take its 408 before it is destroyed. */
export const httpCloseGraceMs = 2_000

/** The limits of `guardBodyArrival` (tests shrink them). */
export interface BodyArrivalLimits {
  readonly graceMs: number
  readonly bytesPerSecondMin: number
}

const defaultArrival: BodyArrivalLimits = { graceMs: httpBodyGraceMs, bytesPerSecondMin: httpBodyBytesPerSecondMin }

/** The options `http.createServer` needs for the header deadline. */
export const serverTimeouts = {
  headersTimeout: httpHeadersTimeoutMs,
  connectionsCheckingInterval: httpConnectionsCheckMs,
  // Streams (SSE, the Streamable HTTP GET stream) stay open: no deadline on whole requests.
  requestTimeout: 0,
} as const

/** Answers `body` as JSON. */
export const sendJson = (
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

/**
 * Watches the body of `req` arrive: once it is past the grace and slower than the rate, answers
 * 408 (unless an answer went out already) and closes the connection. Half-closing first lets the
 * answer reach the client: closing a socket with unread input would reset it.
 */
export const guardBodyArrival = (
  req: IncomingMessage,
  res: ServerResponse,
  limits: BodyArrivalLimits = defaultArrival,
): void => {
  const socket = req.socket
  const startedAt = Date.now()
  const bytesAtStart = socket.bytesRead
  let timer: NodeJS.Timeout | undefined
  const check = () => {
    if (req.complete || socket.destroyed) return
    const elapsedMs = Date.now() - startedAt
    const allowedMs = limits.graceMs + ((socket.bytesRead - bytesAtStart) / limits.bytesPerSecondMin) * 1000
    if (elapsedMs < allowedMs) return schedule(allowedMs - elapsedMs)
    if (!res.headersSent)
      sendJson(
        res,
        408,
        {
          error: `the request body came too slowly: after ${limits.graceMs / 1000} s a body must arrive at ${limits.bytesPerSecondMin} bytes/s at least`,
        },
        { connection: "close" },
      )
    socket.end()
    setTimeout(() => socket.destroy(), httpCloseGraceMs).unref()
  }
  const schedule = (ms: number) => {
    timer = setTimeout(check, Math.max(ms, 10))
    timer.unref()
  }
  schedule(limits.graceMs)
  const stop = () => clearTimeout(timer)
  req.once("end", stop)
  req.once("close", stop)
}

/** Reads a JSON body up to `bytesMax`; answers 413/400 itself and returns undefined. */
export const readJsonBody = (
  req: IncomingMessage,
  res: ServerResponse,
  bytesMax = httpBodyBytesMax,
): Promise<{ value: unknown; bytes: number } | undefined> =>
  new Promise((resolve) => {
    const declared = Number(req.headers["content-length"] ?? 0)
    if (declared > bytesMax) {
      sendJson(res, 413, { error: `request body of ${declared} bytes exceeds the limit of ${bytesMax} bytes` })
      req.resume()
      return resolve(undefined)
    }
    const chunks: Array<Buffer> = []
    let size = 0
    let aborted = false
    req.on("data", (chunk: Buffer) => {
      size += chunk.length
      if (size > bytesMax && !aborted) {
        aborted = true
        sendJson(res, 413, { error: `request body exceeds the limit of ${bytesMax} bytes` })
        resolve(undefined)
      }
      if (!aborted) chunks.push(chunk)
    })
    req.on("end", () => {
      if (aborted) return
      try {
        resolve({
          value: chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString("utf8")),
          bytes: size,
        })
      } catch (error) {
        sendJson(res, 400, {
          jsonrpc: "2.0",
          id: null,
          error: {
            code: -32700,
            message: `body is not JSON: ${error instanceof Error ? error.message : String(error)}`,
          },
        })
        resolve(undefined)
      }
    })
    req.on("error", () => resolve(undefined))
  })
