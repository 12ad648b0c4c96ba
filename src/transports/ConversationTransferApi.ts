/**
 * The conversations backup (conversations/ConversationTransfer.ts) over the daemon's HTTP server,
 * so `mnemos export` and `mnemos import` work while the daemon owns the data directory:
 *
 *   GET  /api/conversations/export[?project=P&session=S]
 *        the versioned JSONL, exactly the bytes `exportConversations` writes; `content-length`
 *        and `x-mnemos-records` (the record lines after the header) let the client tell a whole
 *        file from one cut short (the format has no trailer)
 *   POST /api/conversations/import?policy=reject|overwrite[&project=P]
 *        the file as the raw body (not held to the 16 MiB JSON limit; at most
 *        `importUploadBytesMax`); answers `{records, policy}` or `{error, line?}`
 *
 * Both are under `/api/`, so they need the data directory's bearer token (or the dashboard's
 * session) on loopback too, like every REST read.
 *
 * Owns the spool directory `tmp/` of the data directory. Export writes its one-snapshot file
 * there (one read transaction: the store's reads are consistent within one turn only, so the
 * snapshot cannot be streamed across the socket's waits), unlinks it while open and streams it
 * with backpressure. Import spools the body there first, then runs `importConversations` on it
 * through the privacy filter, exactly as the CLI does in-process. Spool files carry the pid of
 * the process that made them: only the lock owner writes here, so files of other pids are
 * leftovers of a crash and are removed. A spool file is removed when its request ends, however it
 * ends. At most one import and `exportsRunningMax` exports run at once; a client that goes away
 * during an import interrupts it (nothing is imported unless the import had already committed).
 */
import { randomBytes } from "node:crypto"
import { mkdirSync, readdirSync, rmSync } from "node:fs"
import { open } from "node:fs/promises"
import type { IncomingMessage, ServerResponse } from "node:http"
import { join } from "node:path"
import { pipeline } from "node:stream/promises"
import { type Context, Effect, Exit, Result, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { type ImportOptions, importConversations } from "../conversations/ConversationImport.ts"
import { conversationStore } from "../conversations/ConversationStore.ts"
import {
  defaultImportLimits,
  exportConversations,
  importUploadBytesMax,
  TransferFailed,
} from "../conversations/ConversationTransfer.ts"
import { SessionId } from "../conversations/Model.ts"
import { ProjectName } from "../graph/Model.ts"
import { filteredStore } from "../privacy/PrivacyFilter.ts"
import type { SessionServices } from "../tools/Tool.ts"

/** Exports served at once (each spools one snapshot to disk). */
export const exportsRunningMax = 2
/** Bytes read from a spool file per chunk sent: 1 MiB. */
const spoolChunkBytes = 1024 * 1024
/** The header naming how many record lines follow the export's header line. */
export const exportRecordsHeader = "x-mnemos-records"

/** What the routes need from the server. */
export interface ConversationTransferConfig {
  readonly dataDir: string
  readonly context: Context.Context<SessionServices>
  readonly sendJson: (res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>) => void
}

/** The two routes, with their concurrency counters. */
export interface ConversationTransferApi {
  readonly exportRoute: (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void>
  readonly importRoute: (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void>
}

const ExportQuery = Schema.Struct({ project: Schema.optional(ProjectName), session: Schema.optional(SessionId) })
const ImportQuery = Schema.Struct({
  policy: Schema.optional(Schema.Literals(["reject", "overwrite"])),
  project: Schema.optional(ProjectName),
})

/** The query's parameters decoded by `schema`, or why not. */
const decodeQuery = <A>(schema: Schema.Codec<A, unknown>, url: URL) =>
  Schema.decodeUnknownResult(schema)(Object.fromEntries(url.searchParams), { onExcessProperty: "error" })

const conversationStoreOf = Effect.gen(function* () {
  return (yield* Router).store(conversationStore)
})

/** The spool directory, created on first need, with the leftovers of earlier processes removed. */
const spoolPath = (dataDir: string, kind: "export" | "import"): string => {
  const directory = join(dataDir, "tmp")
  mkdirSync(directory, { recursive: true, mode: 0o700 })
  const mine = `-${process.pid}-`
  for (const name of readdirSync(directory))
    if (!name.includes(mine)) rmSync(join(directory, name), { recursive: true, force: true })
  return join(directory, `${kind}${mine}${randomBytes(6).toString("hex")}.jsonl`)
}

/**
 * Writes the request body to `path` (0600), at most `bytesMax` bytes; false when it is longer
 * (the rest is left unread). Rejects when the client goes away mid-body.
 */
const spoolBody = async (req: IncomingMessage, path: string, bytesMax: number): Promise<boolean> => {
  const file = await open(path, "wx", 0o600)
  try {
    let bytes = 0
    for await (const chunk of req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      bytes += chunk.length
      if (bytes > bytesMax) return false
      await file.write(chunk)
    }
    return true
  } finally {
    await file.close()
  }
}

/** The failure of an effect run for a route: its `TransferFailed`, else the cause as text. */
const failureOf = (exit: Exit.Exit<unknown, unknown>): TransferFailed | string | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
  if (failure?._tag === "Fail" && failure.error instanceof TransferFailed) return failure.error
  return String(exit.cause)
}

/** Answers with the spooled export (unlinked once open), streamed with backpressure. */
const streamSpool = async (res: ServerResponse, spool: string, records: number): Promise<void> => {
  const file = await open(spool, "r")
  rmSync(spool, { force: true }) // the open descriptor keeps the content until it is closed
  try {
    const { size } = await file.stat()
    res.writeHead(200, {
      "content-type": "application/x-ndjson; charset=utf-8",
      "content-length": size,
      "cache-control": "no-store",
      [exportRecordsHeader]: String(records),
    })
    // The client is slower than the disk: the pipeline waits for 'drain' whenever the socket is full.
    await pipeline(file.createReadStream({ highWaterMark: spoolChunkBytes, autoClose: false }), res)
  } finally {
    await file.close()
  }
}

/** Makes the routes for the data directory of `config`. */
export const makeConversationTransferApi = (config: ConversationTransferConfig): ConversationTransferApi => {
  let exportsRunning = 0
  let importRunning = false
  const { sendJson } = config
  const run = Effect.runPromiseExitWith(config.context)

  const exportRoute = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    if (req.method !== "GET") return sendJson(res, 405, { error: `${req.method} is not allowed; GET the export` })
    const query = decodeQuery(ExportQuery, url)
    if (Result.isFailure(query)) return sendJson(res, 400, { error: query.failure.message })
    if (exportsRunning >= exportsRunningMax)
      return sendJson(
        res,
        503,
        { error: `${exportsRunningMax} exports are running; try again` },
        { "retry-after": "5" },
      )
    exportsRunning++
    const spool = spoolPath(config.dataDir, "export")
    try {
      const exit = await run(
        Effect.flatMap(conversationStoreOf, (store) =>
          exportConversations(store, spool, query.success, defaultImportLimits),
        ),
      )
      if (Exit.isSuccess(exit)) return await streamSpool(res, spool, exit.value.records)
      const failure = failureOf(exit)
      return sendJson(res, 500, { error: failure instanceof TransferFailed ? failure.message : String(failure) })
    } catch (error) {
      // Before the first byte the client gets a JSON error; after it, a connection cut short.
      if (!res.headersSent) sendJson(res, 500, { error: error instanceof Error ? error.message : String(error) })
      else res.destroy()
    } finally {
      rmSync(spool, { force: true })
      exportsRunning--
    }
  }

  /** Imports the spooled body and answers; a client that goes away first interrupts the import. */
  const importSpool = async (res: ServerResponse, spool: string, options: ImportOptions): Promise<void> => {
    const gone = new AbortController()
    const onClose = () => {
      if (!res.writableEnded) gone.abort()
    }
    res.on("close", onClose)
    const exit = await run(
      Effect.flatMap(conversationStoreOf, (store) =>
        importConversations(filteredStore(store), spool, options, defaultImportLimits),
      ),
      { signal: gone.signal },
    )
    res.off("close", onClose)
    if (gone.signal.aborted) return
    if (Exit.isSuccess(exit)) return sendJson(res, 200, { ...exit.value, policy: options.policy })
    const failure = failureOf(exit)
    if (!(failure instanceof TransferFailed)) return sendJson(res, 500, { error: String(failure) })
    return sendJson(res, failure.line !== undefined ? 422 : 503, {
      error: failure.message.replaceAll(spool, "the uploaded file"),
      ...(failure.line !== undefined ? { line: failure.line } : {}),
    })
  }

  const importRoute = async (req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> => {
    if (req.method !== "POST") return sendJson(res, 405, { error: `${req.method} is not allowed; POST the file` })
    const query = decodeQuery(ImportQuery, url)
    if (Result.isFailure(query)) return sendJson(res, 400, { error: query.failure.message })
    const bytesMax = importUploadBytesMax(defaultImportLimits)
    // The body is left unread: the connection closes after the answer.
    const refuse = (status: number, error: string) => sendJson(res, status, { error }, { connection: "close" })
    const tooLarge = () => refuse(413, `the file is larger than an import accepts (${bytesMax} bytes)`)
    if (Number(req.headers["content-length"] ?? 0) > bytesMax) return tooLarge()
    if (importRunning) return refuse(409, "another import is running")
    importRunning = true
    const spool = spoolPath(config.dataDir, "import")
    try {
      if (!(await spoolBody(req, spool, bytesMax))) return tooLarge()
      const { policy = "reject", project } = query.success
      return await importSpool(res, spool, { policy, ...(project !== undefined ? { project } : {}) })
    } catch (error) {
      // The client went away mid-body (nothing to answer), or the spool could not be written.
      if (!res.headersSent && !res.destroyed)
        sendJson(res, 500, { error: `cannot receive the file: ${error instanceof Error ? error.message : error}` })
    } finally {
      rmSync(spool, { force: true })
      importRunning = false
    }
  }

  return { exportRoute, importRoute }
}
