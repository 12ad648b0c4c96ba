/**
 * A real browser for the dashboard tests: Debian's Chromium driven by playwright-core (no
 * browser download), headless, WebGL on SwiftShader (CI has no GPU). Also builds the dashboard
 * with Vite into a temporary directory the daemon is pointed at (`MNEMOS_DASHBOARD_DIR`), and
 * keeps screenshots under `test-results/dashboard/` (copied to `docs/images/` when
 * `MNEMOS_UPDATE_DOCS_IMAGES=1`).
 */
import { spawn } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { repoRoot } from "../transports/harness.ts"

/** Where the tests expect Chromium (installed by .ci/run: apt-get install chromium). */
export const chromiumPath = process.env.MNEMOS_CHROMIUM ?? "/usr/bin/chromium"
export const screenshotDir = join(repoRoot, "test-results", "dashboard")
const docsImageDir = join(repoRoot, "docs", "images")

/** Builds the dashboard into `outDir`. */
export const buildDashboard = (outDir: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(repoRoot, "node_modules", "vite", "bin", "vite.js"), "build"], {
      cwd: repoRoot,
      env: { ...process.env, MNEMOS_DASHBOARD_OUT_DIR: outDir },
      stdio: ["ignore", "pipe", "pipe"],
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`vite build failed (${code}):\n${output}`)),
    )
  })

export const launchChromium = (): Promise<Browser> => {
  if (!existsSync(chromiumPath))
    throw new Error(`no Chromium at ${chromiumPath}: apt-get install -y chromium (see .ci/run)`)
  return chromium.launch({
    executablePath: chromiumPath,
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--use-angle=swiftshader",
      "--enable-unsafe-swiftshader",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-dev-shm-usage",
    ],
  })
}

/**
 * Saves a screenshot of the page as `name`.png (or .jpg for pictures too busy for PNG to stay
 * small, like a 10k-node graph); returns the image.
 */
export const screenshot = async (page: Page, name: string, format: "png" | "jpeg" = "png"): Promise<Buffer> => {
  mkdirSync(screenshotDir, { recursive: true })
  const file = `${name}.${format === "png" ? "png" : "jpg"}`
  const path = join(screenshotDir, file)
  const image = await page.screenshot({
    path,
    type: format,
    ...(format === "jpeg" ? { quality: 82 } : {}),
    animations: "disabled",
    caret: "hide",
  })
  if (process.env.MNEMOS_UPDATE_DOCS_IMAGES === "1") {
    mkdirSync(docsImageDir, { recursive: true })
    copyFileSync(path, join(docsImageDir, `dashboard-${file}`))
  }
  return image
}

/** Console errors and uncaught exceptions of a page, with when they happened. */
export interface PageProblems {
  readonly problems: Array<{ readonly at: number; readonly text: string }>
}

export const watchProblems = (page: Page): PageProblems => {
  const problems: Array<{ at: number; text: string }> = []
  page.on("console", (message) => {
    if (message.type() === "error") problems.push({ at: Date.now(), text: `console: ${message.text()}` })
  })
  page.on("pageerror", (error) => problems.push({ at: Date.now(), text: `exception: ${error.message}` }))
  return { problems }
}
