/**
 * The data directory's path checks: a world-writable directory (or one under a world-writable
 * parent without the sticky bit) and one reached through another user's symbolic link are refused
 * with a message saying why and how to fix it — unless `--force`. And taking the lock puts the
 * directory's config.json in force (or refuses a bad one).
 */
import { spawnSync } from "node:child_process"
import { chmodSync, lchownSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Exit } from "effect"
import { afterAll, afterEach, assert, describe, it } from "vitest"
import { healthCommand } from "../../src/cli/HealthCommand.ts"
import { configurePrivacy, filterText } from "../../src/privacy/PrivacyFilter.ts"
import { AllowUnsafeDataDir, dataDirSafetyProblems, lockDataDir } from "../../src/stores/datadir/DataDir.ts"
import { removeTempDirs, runCommand, tempDir } from "./support.ts"

afterAll(removeTempDirs)
afterEach(() => configurePrivacy({ disabledKinds: [], customPatterns: [] }))

const me = { uid: process.getuid?.(), platform: process.platform }
const repoRoot = join(import.meta.dirname, "..", "..")

const lock = (dir: string, allowUnsafe = false) =>
  Effect.runPromiseExit(
    Effect.scoped(lockDataDir(dir, "mnemos test")).pipe(Effect.provideService(AllowUnsafeDataDir, allowUnsafe)),
  )

describe("path checks", () => {
  it("a world-writable data directory is refused, with why and the fix", () => {
    const dir = join(tempDir(), "data")
    mkdirSync(dir)
    chmodSync(dir, 0o777)
    const [problem] = dataDirSafetyProblems(dir, me)
    assert.strictEqual(problem?.kind, "WorldWritable")
    assert.include(problem?.message ?? "", "world-writable (mode 0777)")
    assert.strictEqual(problem?.fix, `chmod 700 ${dir}`)
    chmodSync(dir, 0o700)
    assert.deepStrictEqual(dataDirSafetyProblems(dir, me), [])
  })

  it("a world-writable parent without the sticky bit is refused; with it (like /tmp) it is fine", () => {
    const parent = join(tempDir(), "shared")
    mkdirSync(join(parent, "data"), { recursive: true, mode: 0o700 })
    chmodSync(parent, 0o777)
    const problems = dataDirSafetyProblems(join(parent, "data"), me)
    assert.strictEqual(problems.length, 1)
    assert.include(problems[0]!.message, "without the sticky bit")
    chmodSync(parent, 0o1777)
    assert.deepStrictEqual(dataDirSafetyProblems(join(parent, "data"), me), [])
    // Also when the data directory does not exist yet.
    chmodSync(parent, 0o777)
    assert.strictEqual(dataDirSafetyProblems(join(parent, "not-yet"), me).length, 1)
    chmodSync(parent, 0o700)
  })

  it("a symbolic link owned by another user on the way is refused; one's own and root's are fine", () => {
    const base = tempDir()
    mkdirSync(join(base, "real"), { mode: 0o700 })
    symlinkSync(join(base, "real"), join(base, "link"))
    assert.deepStrictEqual(dataDirSafetyProblems(join(base, "link", "data"), me), [])
    // Make the link another user's: really (as root), or by asking as someone else (otherwise).
    let asking = me
    if (me.uid === 0) lchownSync(join(base, "link"), 4242, 4242)
    else asking = { ...me, uid: (me.uid ?? 1000) + 1 }
    const [problem] = dataDirSafetyProblems(join(base, "link", "data"), asking)
    assert.strictEqual(problem?.kind, "ForeignSymlink")
    assert.include(problem?.message ?? "", "symbolic link owned by another user")
    assert.include(problem?.fix ?? "", join(base, "real", "data"))
  })

  it("nothing is checked on Windows (no POSIX modes)", () => {
    const dir = tempDir()
    chmodSync(dir, 0o777)
    assert.deepStrictEqual(dataDirSafetyProblems(dir, { uid: undefined, platform: "win32" }), [])
    chmodSync(dir, 0o700)
  })
})

describe("the lock applies them", () => {
  it("refuses an unsafe directory with reason Unsafe, and takes it with --force", async () => {
    const dir = tempDir()
    chmodSync(dir, 0o777)
    const refused = await lock(dir)
    assert.isTrue(Exit.isFailure(refused))
    const error = Exit.isFailure(refused)
      ? (refused.cause.reasons[0] as { error?: { reason: string; message: string } }).error
      : undefined
    assert.strictEqual(error?.reason, "Unsafe")
    assert.include(error?.message ?? "", "Pass --force to use it anyway")
    assert.isTrue(Exit.isSuccess(await lock(dir, true)))
    chmodSync(dir, 0o700)
  })

  it("every command that opens the data directory refuses it (health shown), unless forced", async () => {
    const dir = tempDir()
    chmodSync(dir, 0o777)
    const refused = await runCommand(healthCommand, ["--data-dir", dir])
    assert.isFalse(refused.ok)
    assert.include(refused.error?.message ?? "", "is world-writable")
    const forced = await runCommand(healthCommand, ["--data-dir", dir], { allowUnsafe: true })
    assert.isTrue(forced.ok, `${forced.stderr} ${forced.error?.message}`)
    chmodSync(dir, 0o700)
  })

  it("the real command line: refused with exit 1 and the reason; --force goes ahead", () => {
    const dir = tempDir()
    chmodSync(dir, 0o777)
    const cli = (...args: Array<string>) =>
      spawnSync(process.execPath, ["--import", "tsx", join(repoRoot, "src", "cli.ts"), ...args], {
        cwd: repoRoot,
        encoding: "utf8",
        timeout: 60_000,
      })
    const refused = cli("health", "--data-dir", dir)
    assert.strictEqual(refused.status, 1, refused.stderr)
    assert.include(refused.stderr, "world-writable")
    assert.include(refused.stderr, "--force")
    const forced = cli("health", "--data-dir", dir, "--force")
    assert.strictEqual(forced.status, 0, forced.stderr)
    chmodSync(dir, 0o700)
  }, 120_000)

  it("puts config.json's privacy patterns in force, and refuses a bad config.json", async () => {
    const dir = tempDir()
    writeFileSync(
      join(dir, "config.json"),
      JSON.stringify({ privacy: { patterns: [{ name: "acme-id", regex: "ACME-[0-9]{4}" }] } }),
    )
    assert.strictEqual(filterText("ACME-1234"), "ACME-1234")
    assert.isTrue(Exit.isSuccess(await lock(dir)))
    assert.strictEqual(filterText("ACME-1234"), "[REDACTED:acme-id]")
    writeFileSync(join(dir, "config.json"), "{ not json")
    const refused = await lock(dir)
    const error = Exit.isFailure(refused)
      ? (refused.cause.reasons[0] as { error?: { reason: string; message: string } }).error
      : undefined
    assert.strictEqual(error?.reason, "Config")
    assert.include(error?.message ?? "", "config.json is not valid JSON")
    assert.isTrue(Exit.isFailure(await lock(dir, true)), "--force does not skip a bad config")
  })
})
