/**
 * The dashboard's static files: the single-page app Vite builds into `dist/dashboard/`.
 *
 * Found, in order, in `$MNEMOS_DASHBOARD_DIR`, beside the compiled daemon (`dist/dashboard`
 * next to `dist/transports`) and, when the daemon runs from source, in the repository's
 * `dist/dashboard`. The directory is looked up again whenever it is missing, so a build after the
 * daemon started is picked up. Files are read once and kept (the app is a few hundred KiB);
 * hashed `assets/` are immutable, `index.html` is revalidated. Only files inside the directory are
 * ever served. The files hold no data: serving them needs no login.
 */
import { existsSync } from "node:fs"
import { readFile } from "node:fs/promises"
import type { IncomingMessage, ServerResponse } from "node:http"
import { extname, join, normalize, sep } from "node:path"

/** Largest static file served. */
export const assetBytesMax = 16 * 1024 * 1024

const contentTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".map": "application/json",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
}

/** Headers every dashboard page carries: no framing, no sniffing, no referrer, same-origin only. */
export const pageSecurityHeaders: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
    "connect-src 'self'; worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
}

const candidates = (): ReadonlyArray<string> => [
  ...(process.env.MNEMOS_DASHBOARD_DIR ? [process.env.MNEMOS_DASHBOARD_DIR] : []),
  join(import.meta.dirname, "..", "dashboard"),
  join(import.meta.dirname, "..", "..", "dist", "dashboard"),
]

/** Serves the built app. */
export interface DashboardAssets {
  /** Answers `GET`/`HEAD` of `pathname` when it names a dashboard file; false when it does not. */
  readonly serve: (req: IncomingMessage, res: ServerResponse, pathname: string) => Promise<boolean>
}

/** Serves the built app from the first directory that has one. */
export const makeDashboardAssets = (): DashboardAssets => {
  let root: string | undefined
  const cache = new Map<string, Buffer>()
  const rootDir = () => {
    if (root === undefined || !existsSync(join(root, "index.html"))) {
      root = candidates().find((dir) => existsSync(join(dir, "index.html")))
      cache.clear()
    }
    return root
  }
  /** Reads a file; hashed assets are kept, the page is read afresh (a rebuild changes it). */
  const load = async (file: string, keep: boolean): Promise<Buffer | undefined> => {
    const cached = cache.get(file)
    if (cached !== undefined) return cached
    const bytes = await readFile(file).catch(() => undefined)
    if (bytes === undefined || bytes.length > assetBytesMax) return undefined
    if (keep) cache.set(file, bytes)
    return bytes
  }

  const serve = async (req: IncomingMessage, res: ServerResponse, pathname: string): Promise<boolean> => {
    if (req.method !== "GET" && req.method !== "HEAD") return false
    const isPage = pathname === "/" || pathname === "/index.html"
    const dir = rootDir()
    if (dir === undefined) {
      if (!isPage) return false
      const text =
        "<!doctype html><title>mnemos</title><p>The dashboard is not built. Run <code>npm run build</code> and reload.</p>"
      res.writeHead(503, { "content-type": "text/html; charset=utf-8", ...pageSecurityHeaders })
      res.end(text)
      return true
    }
    let relative: string
    try {
      relative = isPage ? "index.html" : normalize(decodeURIComponent(pathname)).replace(/^[/\\]+/, "")
    } catch {
      return false
    }
    const file = join(dir, relative)
    if (relative === "" || relative.startsWith("..") || !file.startsWith(dir + sep)) return false
    const immutable = relative.startsWith(`assets${sep}`)
    const bytes = await load(file, immutable)
    if (bytes === undefined) return false
    res.writeHead(200, {
      "content-type": contentTypes[extname(file)] ?? "application/octet-stream",
      "content-length": bytes.length,
      "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
      ...pageSecurityHeaders,
    })
    res.end(req.method === "HEAD" ? undefined : bytes)
    return true
  }
  return { serve }
}
