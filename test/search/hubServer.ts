/**
 * A loopback stand-in for the Hugging Face hub: serves files at `/<repo>/resolve/<revision>/<path>`
 * as the hub does (large files by a redirect to another path, as the hub sends them to its CDN),
 * with HTTP Range requests answered 206. Knobs make it misbehave like a real network: cut a file's
 * transfer after some bytes, or serve other bytes than were pinned. It records every request.
 */
import { createHash } from "node:crypto"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { ModelCatalogue, PinnedModel } from "../../src/search/embedding/ModelCatalogue.ts"
import { tinyBertModel, tinyBertParts } from "./tinyModels.ts"

export interface HubRequest {
  readonly path: string
  readonly range: string | undefined
}

export interface LoopbackHub {
  readonly url: string
  readonly requests: Array<HubRequest>
  /** Bytes served per repository path (set to serve other bytes than were pinned). */
  readonly files: Map<string, Buffer>
  /** Cut the next `times` transfers of this repository path after `afterBytes` bytes of the body. */
  readonly cuts: Map<string, { afterBytes: number; times: number }>
  /** Answer every request with the whole file (200), as a server without Range support does. */
  readonly ranges: { ignored: boolean }
  readonly close: () => Promise<void>
}

export const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

/** The tiny BERT as a pinned model of `repo` at `revision`, and its files by repository path. */
export const tinyModel = (repo = "test-org/tiny-bert", revision = "0123456789abcdef") => {
  const model = Buffer.from(tinyBertModel())
  const tokenizer = Buffer.from(JSON.stringify(tinyBertParts.tokenizerJson))
  const pinned: PinnedModel = {
    repo,
    revision,
    files: [
      { path: "onnx/model.onnx", as: "model.onnx", bytes: model.length, sha256: sha256(model) },
      { path: "tokenizer.json", as: "tokenizer.json", bytes: tokenizer.length, sha256: sha256(tokenizer) },
    ],
  }
  const catalogue: ModelCatalogue = { tiny: pinned }
  const files = new Map([
    [`/${repo}/resolve/${revision}/onnx/model.onnx`, model],
    [`/${repo}/resolve/${revision}/tokenizer.json`, tokenizer],
  ])
  return { pinned, catalogue, files }
}

/** Starts the hub on 127.0.0.1 with `files` (repository path → bytes). */
export const startHub = (files: ReadonlyMap<string, Buffer>): Promise<LoopbackHub> => {
  const served = new Map(files)
  const cuts = new Map<string, { afterBytes: number; times: number }>()
  const requests: Array<HubRequest> = []
  const ranges = { ignored: false }
  const server: Server = createServer((request, response) => {
    const url = request.url ?? "/"
    requests.push({ path: url, range: request.headers.range })
    // Large files move to a "CDN" path, as the hub redirects them.
    if (url.endsWith(".onnx") && !url.startsWith("/cdn")) {
      response.writeHead(302, { location: `/cdn${url}` })
      return response.end()
    }
    const path = url.startsWith("/cdn") ? url.slice(4) : url
    const body = served.get(path)
    if (body === undefined) {
      response.writeHead(404)
      return response.end("Entry not found")
    }
    const start = ranges.ignored ? 0 : Number(/^bytes=(\d+)-$/.exec(request.headers.range ?? "")?.[1] ?? 0)
    if (start >= body.length && start > 0) {
      response.writeHead(416, { "content-range": `bytes */${body.length}` })
      return response.end()
    }
    const part = body.subarray(start)
    response.writeHead(start > 0 ? 206 : 200, {
      "content-length": part.length,
      ...(start > 0 ? { "content-range": `bytes ${start}-${body.length - 1}/${body.length}` } : {}),
    })
    const cut = cuts.get(path)
    if (cut === undefined || cut.times === 0 || cut.afterBytes >= part.length) return response.end(part)
    cut.times--
    response.write(part.subarray(0, cut.afterBytes), () => response.socket?.destroy())
  })
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        requests,
        files: served,
        cuts,
        ranges,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          }),
      }),
    ),
  )
}

/** A loopback port nothing listens on (a machine without network, as far as the pull can tell). */
export const closedPort = async (): Promise<number> => {
  const hub = await startHub(new Map())
  const port = Number(new URL(hub.url).port)
  await hub.close()
  return port
}
