/**
 * `mnemos export` and `mnemos import` of conversations through the daemon that owns the data
 * directory (its routes: transports/ConversationTransferApi.ts).
 *
 * Export streams the answer into a temporary file beside the target and renames it into place
 * (AtomicFile.ts) only when the whole file arrived: as many bytes as the daemon announced, the
 * format's header line, and one line per record it announced (the format has no trailer, so a
 * connection cut short would otherwise look like a smaller backup). Import sends the file as the
 * request body and reports the daemon's answer, the same as an import in this process would.
 * Memory holds one chunk at a time either way. node:http directly (not fetch, whose Undici
 * client the project avoids on Node 20).
 */
import { createReadStream, statSync, writeSync } from "node:fs"
import { type ClientRequest, type IncomingMessage, request } from "node:http"
import { pipeline } from "node:stream/promises"
import { Effect, Schema } from "effect"
import {
  defaultImportLimits,
  type ExportSelection,
  exportHeaderLine,
  type ImportPolicy,
  importUploadBytesMax,
  type TransferProgress,
} from "../conversations/ConversationTransfer.ts"
import { exportRecordsHeader } from "../transports/ConversationTransferApi.ts"
import { readToken } from "../transports/Daemon.ts"
import { writeFileAtomicFrom } from "./AtomicFile.ts"
import { runningDaemon } from "./HealthCommand.ts"

/** The most bytes of an error answer read. */
const errorBodyBytesMax = 64 * 1024
/** Bytes read from the file per chunk sent. */
const uploadChunkBytes = 1024 * 1024

/** Where the data directory's daemon listens, and the directory's token. */
export interface DaemonEndpoint {
  readonly dataDir: string
  readonly host: string
  readonly port: number
  readonly pid: number
  readonly token?: string
}

/** The daemon that owns `dataDir`, when one answers for it. */
export const owningDaemon = async (dataDir: string): Promise<DaemonEndpoint | undefined> => {
  const info = await runningDaemon(dataDir)
  if (info === undefined) return undefined
  const token = readToken(dataDir)
  return { dataDir, host: info.host, port: info.port, pid: info.pid, ...(token !== undefined ? { token } : {}) }
}

/** A transfer through the daemon failed; the message says why. */
export class DaemonTransferFailed extends Schema.TaggedError<DaemonTransferFailed>()("DaemonTransferFailed", {
  message: Schema.String,
  /** The 1-based line of the file at fault, when the daemon named one. */
  line: Schema.optional(Schema.Int),
  /** The connection broke after the whole file was sent: the import may have been applied. */
  outcomeUnknown: Schema.optional(Schema.Boolean),
}) {}

const reasonOf = (error: unknown) => (error instanceof Error ? error.message : String(error))

const send = (
  daemon: DaemonEndpoint,
  method: "GET" | "POST",
  path: string,
  headers: Record<string, string>,
  signal: AbortSignal,
): ClientRequest => {
  const host = daemon.host.includes(":") ? `[${daemon.host}]` : daemon.host
  return request({
    host: daemon.host,
    port: daemon.port,
    method,
    path,
    signal,
    headers: {
      host: `${host}:${daemon.port}`,
      ...(daemon.token !== undefined ? { authorization: `Bearer ${daemon.token}` } : {}),
      ...headers,
    },
  })
}

const responseOf = (req: ClientRequest) =>
  new Promise<IncomingMessage>((resolve, reject) => {
    req.once("response", resolve)
    req.once("error", reject)
  })

/** The JSON of an answer (at most `bytesMax` of it read). */
const jsonOf = async (res: IncomingMessage, bytesMax = errorBodyBytesMax): Promise<Record<string, unknown>> => {
  const chunks: Array<Buffer> = []
  let bytes = 0
  for await (const chunk of res as AsyncIterable<Buffer>) {
    bytes += chunk.length
    if (bytes > bytesMax) break
    chunks.push(chunk)
  }
  const text = Buffer.concat(chunks).toString("utf8")
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : { error: text }
  } catch {
    return { error: text.slice(0, 500) }
  }
}

/** The failure an error answer stands for; the import's own refusals keep the daemon's words. */
const refusal = async (res: IncomingMessage, daemon: DaemonEndpoint): Promise<DaemonTransferFailed> => {
  const body = await jsonOf(res)
  const error = typeof body.error === "string" ? body.error : JSON.stringify(body)
  const status = res.statusCode ?? 0
  if (status === 404)
    return new DaemonTransferFailed({
      message: `the daemon (pid ${daemon.pid}) does not offer conversation transfers (an older mnemos?); stop it and run the command again`,
    })
  if ([409, 413, 422, 503].includes(status))
    return new DaemonTransferFailed({ message: error, ...(typeof body.line === "number" ? { line: body.line } : {}) })
  return new DaemonTransferFailed({ message: `the daemon (pid ${daemon.pid}) answered ${status}: ${error}` })
}

/** Tells a whole export from one cut short, chunk by chunk. */
const exportCompleteness = (recordsExpected: number, bytesExpected: number) => {
  const headBytes = Buffer.byteLength(exportHeaderLine) + 1
  let head = Buffer.alloc(0)
  let bytes = 0
  let lines = 0
  return {
    add: (chunk: Buffer) => {
      if (head.length < headBytes) head = Buffer.concat([head, chunk.subarray(0, headBytes - head.length)])
      bytes += chunk.length
      for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, at + 1)) lines++
    },
    records: () => Math.max(0, lines - 1),
    /** What is wrong with what arrived, or undefined when it is whole. */
    problem: (): string | undefined => {
      if (bytes !== bytesExpected) return `${bytes} of ${bytesExpected} bytes arrived`
      if (head.toString("utf8") !== `${exportHeaderLine}\n`) return "it does not start with the format's header"
      if (lines !== recordsExpected + 1) return `${Math.max(0, lines - 1)} of ${recordsExpected} records arrived`
      return undefined
    },
  }
}

const exportPath = (selection: ExportSelection) => {
  const query = new URLSearchParams()
  if (selection.project !== undefined) query.set("project", selection.project)
  if (selection.session !== undefined) query.set("session", selection.session)
  const text = query.toString()
  return `/api/conversations/export${text === "" ? "" : `?${text}`}`
}

const downloadExport = async (
  daemon: DaemonEndpoint,
  file: string,
  selection: ExportSelection,
  onProgress: TransferProgress | undefined,
  signal: AbortSignal,
): Promise<{ readonly records: number }> => {
  let records = 0
  // The temporary file first: a target that cannot be written costs the daemon no export.
  await writeFileAtomicFrom(file, async (fd) => {
    const req = send(daemon, "GET", exportPath(selection), {}, signal)
    req.end()
    const res = await responseOf(req).catch((error) => {
      throw new DaemonTransferFailed({ message: `cannot reach the daemon (pid ${daemon.pid}): ${reasonOf(error)}` })
    })
    if (res.statusCode !== 200) throw await refusal(res, daemon)
    records = Number(res.headers[exportRecordsHeader])
    const bytes = Number(res.headers["content-length"])
    if (!Number.isSafeInteger(records) || !Number.isSafeInteger(bytes)) {
      res.destroy()
      throw new DaemonTransferFailed({ message: "the daemon's answer does not say how long the export is" })
    }
    const received = exportCompleteness(records, bytes)
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) {
        writeSync(fd, chunk)
        received.add(chunk)
        onProgress?.("exporting", received.records(), records)
      }
    } catch (error) {
      throw new DaemonTransferFailed({
        message: `the connection to the daemon broke during the export (${reasonOf(error)}); ${file} was not changed`,
      })
    }
    const problem = received.problem()
    if (problem !== undefined)
      throw new DaemonTransferFailed({
        message: `the export from the daemon was cut short (${problem}); ${file} was not changed`,
      })
  }).catch((error) => {
    throw error instanceof DaemonTransferFailed
      ? error
      : new DaemonTransferFailed({ message: `cannot write ${file}: ${reasonOf(error)}` })
  })
  return { records }
}

/** Options of an import through the daemon. */
export interface DaemonImportOptions {
  readonly policy: ImportPolicy
  readonly project?: string
}

const uploadImport = async (
  daemon: DaemonEndpoint,
  file: string,
  options: DaemonImportOptions,
  onProgress: TransferProgress | undefined,
  signal: AbortSignal,
): Promise<{ readonly records: number }> => {
  let size: number
  try {
    size = statSync(file).size
  } catch (error) {
    throw new DaemonTransferFailed({ message: `cannot read ${file}: ${reasonOf(error)}` })
  }
  const bytesMax = importUploadBytesMax(defaultImportLimits)
  if (size > bytesMax)
    throw new DaemonTransferFailed({ message: `the file is larger than an import accepts (${bytesMax} bytes)` })
  const query = new URLSearchParams({ policy: options.policy })
  if (options.project !== undefined) query.set("project", options.project)
  const req = send(
    daemon,
    "POST",
    `/api/conversations/import?${query}`,
    { "content-type": "application/x-ndjson; charset=utf-8", "content-length": String(size) },
    signal,
  )
  const response = responseOf(req)
  let sent = 0
  const source = createReadStream(file, { highWaterMark: uploadChunkBytes })
  source.on("data", (chunk) => {
    sent += chunk.length
    onProgress?.("uploading", sent, size)
  })
  // Backpressure: the pipe pauses the file while the socket is full. A refusal before the end of
  // the body may break the upload; the answer says why, so the upload's own error is not the news.
  const uploaded = pipeline(source, req).catch(() => undefined)
  let res: IncomingMessage
  try {
    res = await response
  } catch (error) {
    source.destroy()
    const whole = sent === size
    throw new DaemonTransferFailed({
      message: whole
        ? `the connection to the daemon broke after the file was sent (${reasonOf(error)}); the import may or may not have been applied: check with read_messages`
        : `the connection to the daemon broke while sending the file (${reasonOf(error)})`,
      ...(whole ? { outcomeUnknown: true } : {}),
    })
  }
  if (res.statusCode !== 200) {
    const failure = await refusal(res, daemon)
    source.destroy()
    await uploaded
    throw failure
  }
  await uploaded
  const body = await jsonOf(res)
  return { records: typeof body.records === "number" ? body.records : 0 }
}

/** Runs one transfer; an interruption aborts its request. */
const transfer = <A>(run: (signal: AbortSignal) => Promise<A>): Effect.Effect<A, DaemonTransferFailed> =>
  Effect.tryPromise({
    try: run,
    catch: (error) =>
      error instanceof DaemonTransferFailed ? error : new DaemonTransferFailed({ message: reasonOf(error) }),
  })

/** Writes the daemon's export of `selection` to `file` atomically; how many records. */
export const exportThroughDaemon = (
  daemon: DaemonEndpoint,
  file: string,
  selection: ExportSelection,
  onProgress?: TransferProgress,
): Effect.Effect<{ readonly records: number }, DaemonTransferFailed> =>
  transfer((signal) => downloadExport(daemon, file, selection, onProgress, signal))

/** Sends `file` to the daemon to import, all or nothing; how many records it imported. */
export const importThroughDaemon = (
  daemon: DaemonEndpoint,
  file: string,
  options: DaemonImportOptions,
  onProgress?: TransferProgress,
): Effect.Effect<{ readonly records: number }, DaemonTransferFailed> =>
  transfer((signal) => uploadImport(daemon, file, options, onProgress, signal))
