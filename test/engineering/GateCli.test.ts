/**
 * `mnemos gate` as a real process: exit codes 0 (authorized), 1 (blocked, pending, used up) and
 * 2 (no gate), directly on a data directory and through a running daemon (which holds the data
 * directory's lock, so an answer proves the HTTP path); the daemon's `/gate/*` routes; and the
 * git wrapper script of docs/git-push-gate.md refusing and allowing real pushes to a bare remote,
 * both installed as `git` in PATH and sourced as a shell function.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ping, readDaemonInfo } from "../../src/transports/Daemon.ts"
import { git, makeRepo, removeTempDirs, tempDir } from "./harness.ts"

const repoRoot = join(import.meta.dirname, "..", "..")
const cliPath = join(repoRoot, "src", "cli.ts")
const tsxLoader = import.meta.resolve("tsx")
const wrapperPath = join(repoRoot, "scripts", "git-push-gate.sh")

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs a command to completion (never throws on a non-zero exit). */
const run = (command: string, args: ReadonlyArray<string>, options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
  new Promise<Run>((resolve) => {
    execFile(
      command,
      [...args],
      { cwd: options.cwd ?? repoRoot, env: options.env ?? process.env, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }),
    )
  })

const mnemos = (dataDir: string, ...args: Array<string>) =>
  run(process.execPath, ["--import", tsxLoader, cliPath, ...args, "--data-dir", dataDir])

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })

afterAll(removeTempDirs)

describe("mnemos gate, directly on the data directory", () => {
  const dataDir = tempDir("mnemos-gate-")

  it("verify exits 2 while no gate exists, 0 once authorized, and --consume lets exactly one through", async () => {
    const missing = await mnemos(dataDir, "gate", "verify", "push", "--namespace", "repo-a")
    expect(missing.code).toBe(2)
    expect(missing.stdout).toContain("push in repo-a: not_found")

    const set = await mnemos(
      dataDir,
      "gate",
      "set",
      "push",
      "--status",
      "authorized",
      "--namespace",
      "repo-a",
      "--reason",
      "tests green",
    )
    expect(set.code).toBe(0)
    expect(set.stdout).toContain("push in repo-a: authorized")

    const first = await mnemos(dataDir, "gate", "verify", "push", "--namespace", "repo-a", "--consume", "--json")
    expect(first.code).toBe(0)
    expect(JSON.parse(first.stdout)).toMatchObject({ status: "authorized", authorized: true, consumed: true })
    const second = await mnemos(dataDir, "gate", "verify", "push", "--namespace", "repo-a", "--json")
    expect(second.code).toBe(1)
    expect(JSON.parse(second.stdout)).toMatchObject({ status: "pending", authorized: false, consumed: false })
  })

  it("blocked and pending exit 1; list shows every gate with its verdict", async () => {
    expect((await mnemos(dataDir, "gate", "set", "deploy", "--status", "blocked", "--namespace", "repo-b")).code).toBe(
      0,
    )
    expect((await mnemos(dataDir, "gate", "verify", "deploy", "--namespace", "repo-b")).code).toBe(1)
    expect((await mnemos(dataDir, "gate", "set", "push", "--status", "pending", "--namespace", "repo-b")).code).toBe(0)
    expect((await mnemos(dataDir, "gate", "verify", "push", "--namespace", "repo-b")).code).toBe(1)
    const list = await mnemos(dataDir, "gate", "list", "--namespace", "repo-b", "--json")
    expect(list.code).toBe(0)
    const gates = JSON.parse(list.stdout).gates.map((gate: { action: string; verdict: string }) => [
      gate.action,
      gate.verdict,
    ])
    expect(gates).toEqual([
      ["deploy", "blocked"],
      ["push", "pending"],
    ])
  })

  it("bad input is refused: an unknown status, an expiry out of range", async () => {
    const status = await mnemos(dataDir, "gate", "set", "push", "--status", "maybe", "--namespace", "x")
    expect(status.code).not.toBe(0)
    const expiry = await mnemos(
      dataDir,
      "gate",
      "set",
      "push",
      "--status",
      "authorized",
      "--namespace",
      "x",
      "--expires-in",
      "0",
    )
    expect(expiry.code).toBe(1)
    expect(expiry.stderr).toContain("mnemos:")
  })

  it("the namespace defaults to the name of the Git repository around the working directory", async () => {
    const repo = makeRepo(["x"])
    const name = repo.split("/").pop()!
    const env = { ...process.env, MNEMOS_DATA_DIR: dataDir }
    await run(process.execPath, ["--import", tsxLoader, cliPath, "gate", "set", "push", "--status", "authorized"], {
      cwd: repo,
      env,
    })
    const listed = await mnemos(dataDir, "gate", "list", "--namespace", name, "--json")
    expect(JSON.parse(listed.stdout).gates.map((gate: { action: string }) => gate.action)).toEqual(["push"])
  })
})

describe("mnemos gate through the daemon, and the /gate routes", () => {
  const dataDir = tempDir("mnemos-gate-daemon-")
  let daemon: ChildProcess
  let base: string

  beforeAll(async () => {
    const port = await freePort()
    daemon = spawn(
      process.execPath,
      [
        "--import",
        tsxLoader,
        cliPath,
        "serve",
        "--port",
        String(port),
        "--udp-port",
        String(await freePort()),
        "--data-dir",
        dataDir,
      ],
      { cwd: repoRoot, stdio: "ignore" },
    )
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline) {
      const info = readDaemonInfo(dataDir)
      if (info !== undefined && (await ping(info.host, info.port))?.dataDir === dataDir) break
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    const info = readDaemonInfo(dataDir)
    if (info === undefined) throw new Error("the daemon did not start")
    base = `http://127.0.0.1:${info.port}`
  })
  afterAll(async () => {
    if (daemon.exitCode === null) {
      const exited = new Promise((resolve) => daemon.once("exit", resolve))
      daemon.kill("SIGTERM")
      await exited
    }
  })

  it("the CLI answers through the daemon (which holds the lock) with the same exit codes", async () => {
    expect((await mnemos(dataDir, "gate", "verify", "push", "--namespace", "d")).code).toBe(2)
    expect((await mnemos(dataDir, "gate", "set", "push", "--status", "authorized", "--namespace", "d")).code).toBe(0)
    const verified = await mnemos(dataDir, "gate", "verify", "push", "--namespace", "d", "--consume")
    expect(verified.code).toBe(0)
    expect(verified.stdout).toContain("authorization used")
    expect((await mnemos(dataDir, "gate", "verify", "push", "--namespace", "d")).code).toBe(1)
  })

  it("GET /gate/verify answers 404, 200 and 403; POST /gate/set validates its body", async () => {
    const bearer = { authorization: `Bearer ${readFileSync(join(dataDir, "token"), "utf8").trim()}` }
    const verify = (query: string) => fetch(`${base}/gate/verify?${query}`, { headers: bearer })
    expect((await verify("action=ship&namespace=h")).status).toBe(404)
    const bad = await fetch(`${base}/gate/set`, {
      method: "POST",
      headers: bearer,
      body: JSON.stringify({ action: "ship", status: "yes" }),
    })
    expect(bad.status).toBe(400)
    const set = await fetch(`${base}/gate/set`, {
      method: "POST",
      headers: { ...bearer, "x-mnemos-client": "ci-bot" },
      body: JSON.stringify({ action: "ship", status: "authorized", namespace: "h", reason: "green" }),
    })
    expect(set.status).toBe(200)
    expect(((await set.json()) as { gate: unknown }).gate).toMatchObject({
      action: "ship",
      status: "authorized",
      createdBy: "ci-bot",
    })
    const ok = await verify("action=ship&namespace=h&consume=1")
    expect(ok.status).toBe(200)
    expect(await ok.json()).toMatchObject({ status: "authorized", consumed: true })
    expect((await verify("action=ship&namespace=h")).status).toBe(403)
    expect((await verify("namespace=h")).status).toBe(400)
    expect((await fetch(`${base}/gate/set`, { headers: bearer })).status).toBe(405)
    // Without the token, on loopback too, nothing answers but 401.
    expect((await fetch(`${base}/gate/verify?action=ship&namespace=h`)).status).toBe(401)
    const list = (await (await fetch(`${base}/gate/list?namespace=h`, { headers: bearer })).json()) as {
      gates: Array<{ verdict: string }>
    }
    expect(list.gates.map((gate) => gate.verdict)).toEqual(["pending"])
  })
})

describe("the git wrapper script", () => {
  const dataDir = tempDir("mnemos-gate-wrapper-")

  /** A bin directory with `mnemos` (running the CLI from source) and, if asked, `git` (the wrapper). */
  const makeBinDir = (withGit: boolean) => {
    const dir = tempDir("mnemos-bin-")
    const shim = join(dir, "mnemos")
    writeFileSync(shim, `#!/bin/sh\nexec "${process.execPath}" --import "${tsxLoader}" "${cliPath}" "$@"\n`)
    chmodSync(shim, 0o755)
    if (withGit) symlinkSync(wrapperPath, join(dir, "git"))
    return dir
  }
  const binDir = makeBinDir(true)
  const mnemosOnlyDir = makeBinDir(false)
  const env = {
    ...process.env,
    PATH: `${binDir}:${process.env.PATH}`,
    MNEMOS_DATA_DIR: dataDir,
    GIT_AUTHOR_NAME: "T",
    GIT_AUTHOR_EMAIL: "t@example.com",
    GIT_COMMITTER_NAME: "T",
    GIT_COMMITTER_EMAIL: "t@example.com",
  }

  /** A repository with a commit and a bare remote `origin`; returns [repo, remote]. */
  const repoWithRemote = () => {
    const repo = makeRepo(["first"])
    const remote = tempDir("mnemos-remote-")
    mkdirSync(join(remote, "r.git"))
    git(join(remote, "r.git"), "init", "--quiet", "--bare")
    git(repo, "remote", "add", "origin", join(remote, "r.git"))
    return { repo, remote: join(remote, "r.git"), name: repo.split("/").pop()! }
  }
  const remoteHead = (remote: string) =>
    run("git", ["-C", remote, "rev-parse", "--verify", "--quiet", "refs/heads/main"]).then((result) =>
      result.stdout.trim(),
    )

  it("as `git` in PATH: refuses a push without an authorized gate, allows it once authorized, passes other commands", async () => {
    const { repo, remote, name } = repoWithRemote()
    const status = await run("git", ["status", "--short"], { cwd: repo, env })
    expect(status.code).toBe(0)

    const refused = await run("git", ["push", "--quiet", "origin", "main"], { cwd: repo, env })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain(`no 'push' gate in namespace '${name}'`)
    expect(await remoteHead(remote)).toBe("")

    await mnemos(dataDir, "gate", "set", "push", "--status", "blocked", "--namespace", name, "--reason", "tests red")
    const blocked = await run("git", ["-C", repo, "push", "--quiet", "origin", "main"], { env })
    expect(blocked.code).toBe(1)
    expect(blocked.stderr).toContain("tests red")
    expect(await remoteHead(remote)).toBe("")

    await mnemos(dataDir, "gate", "set", "push", "--status", "authorized", "--namespace", name)
    const pushed = await run("git", ["push", "--quiet", "origin", "main"], { cwd: repo, env })
    expect(pushed.code).toBe(0)
    expect(await remoteHead(remote)).toBe(git(repo, "rev-parse", "HEAD"))
  })

  it("sourced as a function with MNEMOS_GATE_CONSUME=1: one authorization, one push", async () => {
    const { repo, remote, name } = repoWithRemote()
    await mnemos(dataDir, "gate", "set", "push", "--status", "authorized", "--namespace", name)
    const script = `source "${wrapperPath}"; git push --quiet origin main; first=$?; git commit --quiet --allow-empty -m again; git push --quiet origin main; echo "$first $?"`
    const result = await run("bash", ["-c", script], {
      cwd: repo,
      env: { ...env, PATH: `${mnemosOnlyDir}:${process.env.PATH}`, MNEMOS_GATE_CONSUME: "1" },
    })
    expect(result.stdout.trim()).toBe("0 1")
    expect(await remoteHead(remote)).toBe(git(repo, "rev-parse", "HEAD~1"))
  })
})
