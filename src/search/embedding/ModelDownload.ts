/**
 * Downloads one pinned file of a sentence model from a Hugging Face hub (or a mirror), resumably
 * and verified: the bytes go to `<target>.part`; a `.part` left by an interrupted run is continued
 * with an HTTP Range request (a server that ignores the range restarts it from the start); a
 * connection that breaks mid-file is resumed the same way, up to `resumeAttemptsMax` times in one
 * run. Only a file of exactly the pinned size and SHA-256 is renamed to `<target>`; anything else
 * is deleted and refused. Redirects are followed (the hub sends large files to its CDN).
 *
 * Fails fast without network: `hubConnectTimeoutMs` to connect (name resolution included), and
 * `hubIdleTimeoutMs` without a byte once connected.
 */
import { createHash } from "node:crypto"
import { createReadStream, createWriteStream, existsSync, renameSync, rmSync, statSync, truncateSync } from "node:fs"
import type { IncomingMessage } from "node:http"
import { Schema } from "effect"
import type { PinnedFile } from "./ModelCatalogue.ts"

/** Longest wait for a connection to the hub. */
export const hubConnectTimeoutMs = 5_000
/** Longest silence of a connected download. */
export const hubIdleTimeoutMs = 30_000
/** Redirects followed for one request. */
const redirectsMax = 5
/** How often one run resumes a file whose connection broke. */
export const resumeAttemptsMax = 3

/** Why a model could not be pulled, used or removed. */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  reason: Schema.Literals(["Unknown", "Offline", "Http", "Interrupted", "Mismatch", "NotPulled", "InUse", "Io"]),
  message: Schema.String,
}) {}

/** Bytes of a file received so far, of its pinned total; called as they arrive. */
export type DownloadProgress = (file: string, receivedBytes: number, totalBytes: number) => void

/**
 * `request` of `node:https` or `node:http`, loaded at the first download: every daemon loads this
 * module (the model folder's), and loading TLS's modules was about 2 ms of each start.
 */
const requestFor = (protocol: string) =>
  protocol === "https:" ? process.getBuiltinModule("node:https").request : process.getBuiltinModule("node:http").request

const offlineCodes = new Set(["ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ENETUNREACH", "EHOSTUNREACH", "ETIMEDOUT"])

/** Opens a GET of `url` from `offset` on, following redirects; resolves with the response. */
const get = (url: string, offset: number, redirects = 0): Promise<IncomingMessage> =>
  new Promise((resolve, reject) => {
    const parsed = new URL(url)
    const request = requestFor(parsed.protocol)(parsed, {
      headers: { "user-agent": "mnemos", ...(offset > 0 ? { range: `bytes=${offset}-` } : {}) },
    })
    const connectTimer = setTimeout(
      () => request.destroy(Object.assign(new Error("connect timeout"), { code: "ETIMEDOUT" })),
      hubConnectTimeoutMs,
    )
    request.once("socket", (socket) => {
      if (!socket.connecting) clearTimeout(connectTimer)
      else socket.once("connect", () => clearTimeout(connectTimer))
    })
    request.setTimeout(hubIdleTimeoutMs, () =>
      request.destroy(Object.assign(new Error("no answer"), { code: "ETIMEDOUT" })),
    )
    request.once("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(connectTimer)
      const offline = error.code !== undefined && offlineCodes.has(error.code)
      reject(
        new ModelError({
          reason: offline ? "Offline" : "Interrupted",
          message: `cannot reach ${parsed.origin}: ${error.code ?? error.message}`,
        }),
      )
    })
    request.once("response", (response) => {
      clearTimeout(connectTimer)
      const status = response.statusCode ?? 0
      const location = response.headers.location
      if (status >= 300 && status < 400 && location !== undefined) {
        response.resume()
        if (redirects >= redirectsMax)
          return reject(new ModelError({ reason: "Http", message: `${url}: more than ${redirectsMax} redirects` }))
        return resolve(get(new URL(location, url).href, offset, redirects + 1))
      }
      resolve(response)
    })
    request.end()
  })

/** The SHA-256 of a file, hex. */
export const sha256Of = (path: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const hash = createHash("sha256")
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .once("error", reject)
      .once("end", () => resolve(hash.digest("hex")))
  })

const sizeOf = (path: string) => (existsSync(path) ? statSync(path).size : 0)

/** One request's worth: appends to `part` from its current size; resolves when the response ends. */
const transfer = async (url: string, part: string, file: PinnedFile, progress: DownloadProgress) => {
  let offset = sizeOf(part)
  if (offset > file.bytes) {
    truncateSync(part, 0)
    offset = 0
  }
  if (offset === file.bytes) return
  const response = await get(url, offset)
  const status = response.statusCode ?? 0
  if (status === 416 && offset > 0) {
    // The range is past the end: what was kept is not a prefix of this file. Start over.
    response.resume()
    truncateSync(part, 0)
    return transfer(url, part, file, progress)
  }
  if (status !== 200 && status !== 206) {
    response.resume()
    throw new ModelError({ reason: "Http", message: `${url} answered HTTP ${status}` })
  }
  const resumed = status === 206
  if (!resumed) offset = 0
  const out = createWriteStream(part, { flags: resumed ? "a" : "w" })
  let received = offset
  await new Promise<void>((resolve, reject) => {
    let settled = false
    // The first outcome is the one reported: destroying the response reports "aborted" as well.
    const fail = (error: ModelError) => {
      if (settled) return
      settled = true
      reject(error)
      response.destroy()
      out.destroy()
    }
    // A broken connection keeps what arrived: the next request resumes after it.
    const broke = () => {
      if (settled) return
      settled = true
      response.unpipe(out)
      out.end(() => reject(new ModelError({ reason: "Interrupted", message: `${file.path}: the connection broke` })))
    }
    response.on("data", (chunk: Buffer) => {
      received += chunk.length
      if (received > file.bytes)
        return fail(
          new ModelError({ reason: "Mismatch", message: `${file.path} is larger than its pinned ${file.bytes} bytes` }),
        )
      progress(file.as, received, file.bytes)
    })
    response.once("aborted", broke)
    response.once("error", broke)
    response.pipe(out)
    out.once("error", (error) => fail(new ModelError({ reason: "Io", message: `${part}: ${error.message}` })))
    out.once("finish", () => {
      if (settled) return
      settled = true
      resolve()
    })
  })
  if (sizeOf(part) < file.bytes)
    throw new ModelError({
      reason: "Interrupted",
      message: `${file.path}: the transfer ended at ${sizeOf(part)} of ${file.bytes} bytes`,
    })
}

/**
 * Downloads `file` from `url` to `target` (resuming `<target>.part`), verified against its pin.
 * Rejects with a `ModelError`; on a mismatch the partial file is gone too.
 */
export const downloadPinnedFile = async (
  url: string,
  target: string,
  file: PinnedFile,
  progress: DownloadProgress,
): Promise<void> => {
  const part = `${target}.part`
  for (let attempt = 0; ; attempt++) {
    try {
      await transfer(url, part, file, progress)
      break
    } catch (error) {
      const retry = error instanceof ModelError && error.reason === "Interrupted" && attempt < resumeAttemptsMax
      if (!retry) {
        if (error instanceof ModelError && error.reason === "Mismatch") rmSync(part, { force: true })
        throw error
      }
    }
  }
  const sha256 = await sha256Of(part)
  if (sha256 !== file.sha256) {
    rmSync(part, { force: true })
    throw new ModelError({
      reason: "Mismatch",
      message: `${file.path} has SHA-256 ${sha256}, not the pinned ${file.sha256}: refused and deleted (a damaged download or a changed file; run the pull again, and if it fails the same way the mirror serves other bytes)`,
    })
  }
  renameSync(part, target)
}
