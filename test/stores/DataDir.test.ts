/**
 * The data directory: where it resolves to, and that only one process owns it at a time.
 */
import { spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { Effect, Exit } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { lockDataDir, lockFileName, readLockOwner, resolveDataDir } from "../../src/stores/datadir/DataDir.ts"

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
  it("prefers the flag, then MNEMOS_DATA_DIR, then MCP_MEMORY_STORE_DIR, then XDG_DATA_HOME/mnemos, then ~/.local/share/mnemos", () => {
    const env = {
      MNEMOS_DATA_DIR: "/env/dir",
      MCP_MEMORY_STORE_DIR: "/seed/dir",
      XDG_DATA_HOME: "/xdg",
      HOME: "/home/u",
    }
    expect(resolveDataDir("/flag/dir", env)).toEqual({ path: "/flag/dir", source: "flag" })
    expect(resolveDataDir(undefined, env)).toEqual({ path: "/env/dir", source: "environment" })
    // Seed 002's name for the data directory, below mnemos's own.
    expect(resolveDataDir(undefined, { MCP_MEMORY_STORE_DIR: "/seed/dir", XDG_DATA_HOME: "/xdg" })).toEqual({
      path: "/seed/dir",
      source: "MCP_MEMORY_STORE_DIR",
    })
    expect(resolveDataDir(undefined, { XDG_DATA_HOME: "/xdg" })).toEqual({ path: "/xdg/mnemos", source: "xdg" })
    // A relative $XDG_DATA_HOME is invalid (XDG base directory spec): ignored, not resolved against the cwd.
    expect(resolveDataDir(undefined, { XDG_DATA_HOME: "xdg", HOME: "/home/u" }).source).toBe("default")
    const fallback = resolveDataDir(undefined, {})
    expect(fallback.source).toBe("default")
    expect(fallback.path.endsWith(join(".local", "share", "mnemos"))).toBe(true)
  })
})

describe("MEMORY_PATH (seed 000's variable)", () => {
  it("selects the data directory below --data-dir, MNEMOS_DATA_DIR and MCP_MEMORY_STORE_DIR, above XDG_DATA_HOME", () => {
    const env = { MEMORY_PATH: "/seed0/memory", XDG_DATA_HOME: "/xdg", HOME: "/home/u" }
    expect(resolveDataDir(undefined, env)).toEqual({ path: "/seed0/memory", source: "MEMORY_PATH" })
    expect(resolveDataDir("/flag", env).source).toBe("flag")
    expect(resolveDataDir(undefined, { ...env, MNEMOS_DATA_DIR: "/mine" }).path).toBe("/mine")
    expect(resolveDataDir(undefined, { ...env, MCP_MEMORY_STORE_DIR: "/seed2" }).path).toBe("/seed2")
    // An empty variable is unset.
    expect(resolveDataDir(undefined, { ...env, MNEMOS_DATA_DIR: "", MCP_MEMORY_STORE_DIR: "" }).source).toBe(
      "MEMORY_PATH",
    )
    expect(resolveDataDir(undefined, { ...env, MEMORY_PATH: "" }).source).toBe("xdg")
  })

  it("expands ~ as seed 000's Claude Desktop config writes it, and %USERPROFILE% on Windows (clients pass env verbatim)", () => {
    expect(resolveDataDir(undefined, { MEMORY_PATH: "~/.claude-code/memory", HOME: "/home/u" }, "linux").path).toBe(
      "/home/u/.claude-code/memory",
    )
    expect(resolveDataDir(undefined, { MNEMOS_DATA_DIR: "~", HOME: "/home/u" }, "linux").path).toBe("/home/u")
    // A ~ inside a path is a name like any other.
    expect(resolveDataDir(undefined, { MEMORY_PATH: "/srv/~x", HOME: "/home/u" }, "linux").path).toBe("/srv/~x")
    // Off Windows, %NAME% is left alone (it is a legal file name).
    expect(resolveDataDir(undefined, { MEMORY_PATH: "/srv/%HOME%", HOME: "/home/u" }, "linux").path).toBe("/srv/%HOME%")
    const windows = resolveDataDir(
      undefined,
      { MEMORY_PATH: "%USERPROFILE%/.claude-code/memory", USERPROFILE: "/users/me" },
      "win32",
    )
    expect(windows.path).toBe(resolve("/users/me/.claude-code/memory"))
  })

  it("is refused when it names a file (an official memory.jsonl) rather than a directory, saying what to do", async () => {
    const dir = tempDir()
    const file = join(dir, "memory.jsonl")
    writeFileSync(file, "")
    for (const path of [file, join(dir, "not-yet.jsonl")]) {
      const exit = await Effect.runPromiseExit(Effect.scoped(lockDataDir(path, "test")))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("not a directory")
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("mnemos import --format official-jsonl")
    }
    expect(readFileSync(file, "utf8")).toBe("")
    expect(existsSync(join(dir, "not-yet.jsonl"))).toBe(false)
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

  it("takes over a lock torn by a crash during its creation, once it is old enough not to be one being written", async () => {
    const dir = tempDir()
    const lockPath = join(dir, lockFileName)
    writeFileSync(lockPath, '{"pid": 12')
    const fresh = await Effect.runPromiseExit(Effect.scoped(lockDataDir(dir, "successor")))
    expect(Exit.isFailure(fresh) && String(fresh.cause)).toContain("written moments ago")
    expect(readFileSync(lockPath, "utf8")).toBe('{"pid": 12')
    const minuteAgo = new Date(Date.now() - 60_000)
    utimesSync(lockPath, minuteAgo, minuteAgo)
    const exit = await Effect.runPromiseExit(Effect.scoped(lockDataDir(dir, "successor")))
    expect(Exit.isSuccess(exit)).toBe(true)
  })

  it("never takes over the lock of another host: it names the host and how to remove the lock", async () => {
    const dir = tempDir()
    const lock = { pid: 1, host: `not-${hostname()}`, startedAt: "2026-01-01T00:00:00Z", command: "mnemos serve" }
    writeFileSync(join(dir, lockFileName), JSON.stringify(lock))
    const exit = await Effect.runPromiseExit(Effect.scoped(lockDataDir(dir, "successor")))
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain(`locked by mnemos process 1 on host not-${hostname()}`)
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain(`remove ${join(dir, lockFileName)}`)
    expect(readLockOwner(dir)).toEqual(lock)
  })

  describe.runIf(process.platform === "linux")("a pid alive now that is not the lock's process (Linux)", () => {
    const bootId = () => readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
    const startOf = (pid: number) => {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19])
    }
    const takesOver = async (dir: string) => {
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            yield* lockDataDir(dir, "successor")
            expect(readLockOwner(dir)).toMatchObject({ pid: process.pid, command: "successor" })
          }),
        ),
      )
    }
    const lockOf = (pid: number, extra: object) => ({
      pid,
      host: hostname(),
      startedAt: "2026-01-01T00:00:00Z",
      command: "crashed",
      ...extra,
    })

    /** Runs `body` with the pid of a live process (not this one), ended after. */
    const withLiveProcess = async (body: (pid: number) => Promise<void>) => {
      const other = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" })
      try {
        await body(other.pid!)
      } finally {
        other.kill()
      }
    }

    it("takes over a lock whose pid now belongs to another process (another start tick)", () =>
      withLiveProcess(async (pid) => {
        const dir = tempDir()
        const lock = lockOf(pid, { bootId: bootId(), processStart: startOf(pid) - 1 })
        writeFileSync(join(dir, lockFileName), JSON.stringify(lock))
        await takesOver(dir)
      }))

    it("takes over a lock left before a reboot (another boot id), whatever owns its pid now", async () => {
      const dir = tempDir()
      writeFileSync(
        join(dir, lockFileName),
        JSON.stringify(lockOf(process.ppid, { bootId: "00000000-0000-0000-0000-000000000000", processStart: 1 })),
      )
      await takesOver(dir)
    })

    it("takes over a lock with this process's pid left by an earlier process (a container restarted)", async () => {
      const dir = tempDir()
      writeFileSync(
        join(dir, lockFileName),
        JSON.stringify(lockOf(process.pid, { bootId: bootId(), processStart: startOf(process.pid) - 1 })),
      )
      await takesOver(dir)
    })

    it("still refuses a lock whose process is the one that took it", () =>
      withLiveProcess(async (pid) => {
        const dir = tempDir()
        writeFileSync(
          join(dir, lockFileName),
          JSON.stringify(lockOf(pid, { bootId: bootId(), processStart: startOf(pid) })),
        )
        const exit = await Effect.runPromiseExit(Effect.scoped(lockDataDir(dir, "successor")))
        expect(Exit.isFailure(exit) && String(exit.cause)).toContain(`in use by mnemos process ${pid}`)
      }))
  })

  it("processes starting at once over a stale lock: exactly one takes it, the others name that one", async () => {
    for (let round = 0; round < 2; round++) {
      const dir = tempDir()
      const dead = spawnSync(process.execPath, ["-e", "process.exit(0)"])
      writeFileSync(
        join(dir, lockFileName),
        JSON.stringify({ pid: dead.pid, host: hostname(), startedAt: "2026-01-01T00:00:00Z", command: "crashed" }),
      )
      const takers = Array.from({ length: 5 }, () =>
        spawn(process.execPath, ["--import", "tsx", "test/support/lockTaker.ts", dir], {
          stdio: ["pipe", "pipe", "inherit"],
        }),
      )
      const exited = takers.map((taker) => new Promise((resolve) => taker.once("exit", resolve)))
      // Each taker reports, then the one holding the lock is let go: no one can find it free meanwhile.
      const outputs = await Promise.all(
        takers.map(
          (taker) =>
            new Promise<string>((resolve) => {
              let output = ""
              taker.stdout.on("data", (chunk: Buffer) => {
                output += chunk.toString()
                if (output.includes("\n")) resolve(output.trim())
              })
              taker.once("exit", () => resolve(output.trim()))
            }),
        ),
      )
      for (const taker of takers) taker.stdin.end()
      await Promise.all(exited)
      const winners = outputs.filter((output) => output.startsWith("ACQUIRED"))
      expect(winners, outputs.join("\n")).toHaveLength(1)
      const winner = winners[0]!.split(" ")[1]
      for (const output of outputs.filter((output) => !output.startsWith("ACQUIRED")))
        expect(output).toContain(`in use by mnemos process ${winner}`)
    }
  }, 120_000)
})
