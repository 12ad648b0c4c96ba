/**
 * The data directory: where it resolves to, and that only one process owns it at a time.
 */
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { lockDataDir, lockFileName, readLockOwner, resolveDataDir } from "../../src/stores/DataDir.ts"

const dirs: Array<string> = []
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "mnemos-datadir-"))
  dirs.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe("resolveDataDir", () => {
  it("prefers the flag, then MNEMOS_DATA_DIR, then XDG_DATA_HOME/mnemos, then ~/.local/share/mnemos", () => {
    const env = { MNEMOS_DATA_DIR: "/env/dir", XDG_DATA_HOME: "/xdg", HOME: "/home/u" }
    expect(resolveDataDir("/flag/dir", env)).toEqual({ path: "/flag/dir", source: "flag" })
    expect(resolveDataDir(undefined, env)).toEqual({ path: "/env/dir", source: "environment" })
    expect(resolveDataDir(undefined, { XDG_DATA_HOME: "/xdg" })).toEqual({ path: "/xdg/mnemos", source: "xdg" })
    const fallback = resolveDataDir(undefined, {})
    expect(fallback.source).toBe("default")
    expect(fallback.path.endsWith(join(".local", "share", "mnemos"))).toBe(true)
  })
})

describe("the data directory lock", () => {
  it("is taken for the life of the scope, names its owner, and is released after", async () => {
    const dir = tempDir()
    const owner = await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const taken = yield* lockDataDir(dir, "test")
          expect(readLockOwner(dir)).toMatchObject({ pid: process.pid, host: hostname(), command: "test" })
          // A second taker in the same process is refused too.
          const again = yield* Effect.exit(Effect.scoped(lockDataDir(dir, "again")))
          expect(Exit.isFailure(again)).toBe(true)
          return taken
        }),
      ),
    )
    expect(owner.pid).toBe(process.pid)
    expect(readLockOwner(dir)).toBeUndefined()
  })

  it("refuses a second process, naming the owner's pid, and exits that process non-zero", async () => {
    const dir = tempDir()
    const holder = spawn(
      process.execPath,
      ["--import", "tsx", "src/cli.ts", "serve", "--data-dir", dir, "--port", "0"],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    )
    try {
      await new Promise<void>((resolve, reject) => {
        let output = ""
        holder.stdout.on("data", (chunk: Buffer) => {
          output += chunk.toString()
          if (output.includes("listening")) resolve()
        })
        holder.once("exit", (code) => reject(new Error(`the first daemon exited early (${code})`)))
      })
      const second = spawnSync(
        process.execPath,
        ["--import", "tsx", "src/cli.ts", "serve", "--stdio", "--data-dir", dir],
        {
          input: "",
          encoding: "utf8",
          timeout: 60_000,
        },
      )
      expect(second.status).toBe(1)
      expect(second.stderr).toContain(`in use by mnemos process ${holder.pid}`)
    } finally {
      holder.kill("SIGTERM")
      await new Promise((resolve) => holder.once("exit", resolve))
    }
    expect(readLockOwner(dir)).toBeUndefined()
  })

  it("takes over a lock left by a process that is gone", async () => {
    const dir = tempDir()
    const dead = spawnSync(process.execPath, ["-e", "process.exit(0)"])
    writeFileSync(
      join(dir, lockFileName),
      JSON.stringify({ pid: dead.pid, host: hostname(), startedAt: "2026-01-01T00:00:00Z", command: "crashed" }),
    )
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          yield* lockDataDir(dir, "successor")
          expect(JSON.parse(readFileSync(join(dir, lockFileName), "utf8"))).toMatchObject({
            pid: process.pid,
            command: "successor",
          })
        }),
      ),
    )
  })

  it("takes over a lock torn by a crash during its creation", async () => {
    const dir = tempDir()
    writeFileSync(join(dir, lockFileName), '{"pid": 12')
    const exit = await Effect.runPromiseExit(Effect.scoped(lockDataDir(dir, "successor")))
    expect(Exit.isSuccess(exit)).toBe(true)
  })
})
