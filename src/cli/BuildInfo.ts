/**
 * Which code is running: the package version, the git commit and the build time, read from
 * `dist/build-info.json` (written by `npm run build`). Run from source (tsx), it asks git.
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

/** Version, commit and build time of this build. */
export interface BuildInfo {
  readonly version: string
  readonly gitCommit: string
  readonly builtAt: string
}

const readJson = (relative: string): unknown =>
  JSON.parse(readFileSync(fileURLToPath(new URL(relative, import.meta.url)), "utf8"))

const fromSource = (): BuildInfo => {
  const { version } = readJson("../../package.json") as { version: string }
  let gitCommit = "unknown"
  try {
    gitCommit = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { stdio: ["ignore", "pipe", "ignore"] })
      .toString()
      .trim()
  } catch {
    // not a git checkout
  }
  return { version, gitCommit, builtAt: "not built (running from source)" }
}

let cached: BuildInfo | undefined

/** This process's build information. */
export const buildInfo = (): BuildInfo => {
  if (cached === undefined) {
    try {
      cached = readJson("../build-info.json") as BuildInfo
    } catch {
      cached = fromSource()
    }
  }
  return cached
}

/** The one-line form `mnemos --version` prints. */
export const versionLine = (): string => {
  const info = buildInfo()
  return `${info.version} (commit ${info.gitCommit}, built ${info.builtAt})`
}
