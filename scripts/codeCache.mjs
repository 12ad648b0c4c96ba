// Writes the V8 code cache of the bundled CLI (dist/bundle/cli.cjs.cache; src/cli/Launcher.ts
// reads it). The cache is made by a real run, so that it holds the code a start runs and not only
// the bundle's top level: a daemon on a fresh data directory answers a first MCP session
// (initialize, tools/list, a read and a write) through the stdio shim, then stops; the daemon's
// process writes the cache as it exits. The shim's and `serve --stdio`'s own few modules are
// compiled when used. Without a cache mnemos runs as well, only slower to start, so a run that
// fails here is reported and the build goes on.
import { spawn } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

const cli = "dist/cli.js"
const cacheFile = "dist/bundle/cli.cjs.cache"
/** The whole run (two starts and a few calls) on a slow, shared machine. */
const runTimeoutMs = 120_000
const pollMs = 20

/** The processes this run started, stopped if it times out. */
const children = []
const start = (args, options) => {
  const child = spawn(process.execPath, [cli, ...args], options)
  children.push(child)
  return child
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

const exited = (child) =>
  new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once("exit", resolve)))

/** Sends `requests` to the shim one by one, each after the previous answer; resolves when all are answered. */
const session = (shim, requests) =>
  new Promise((resolve, reject) => {
    let buffered = ""
    let next = 0
    const send = () => shim.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: next, ...requests[next] })}\n`)
    shim.stdout.setEncoding("utf8")
    shim.stdout.on("data", (chunk) => {
      buffered += chunk
      for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
        const answer = JSON.parse(buffered.slice(0, end))
        buffered = buffered.slice(end + 1)
        if (answer.id !== next) continue
        if (answer.error !== undefined) return reject(new Error(`${requests[next].method}: ${answer.error.message}`))
        if (requests[next].method === "initialize")
          shim.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`)
        if (++next === requests.length) return resolve()
        send()
      }
    })
    send()
  })

const call = (name, args) => ({ method: "tools/call", params: { name, arguments: args } })

const train = async (dataDir) => {
  const port = await freePort()
  const daemon = start(["serve", "--data-dir", dataDir, "--port", String(port)], {
    env: { ...process.env, MNEMOS_CODE_CACHE_OUT: cacheFile },
    stdio: "ignore",
  })
  try {
    while (!existsSync(join(dataDir, "daemon.json"))) {
      if (daemon.exitCode !== null) throw new Error(`the daemon exited with code ${daemon.exitCode}`)
      await sleep(pollMs)
    }
    const shim = start(["mcp", "--data-dir", dataDir, "--port", String(port), "--no-start"], {
      stdio: ["pipe", "pipe", "ignore"],
    })
    await session(shim, [
      {
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "mnemos-build", version: "0" } },
      },
      { method: "tools/list" },
      call("open_nodes", { names: ["mnemos"] }),
      call("create_entities", { entities: [{ name: "mnemos", entityType: "project", observations: ["built"] }] }),
      call("search_nodes", { query: "mnemos" }),
    ])
    shim.stdin.end()
    await exited(shim)
  } finally {
    daemon.kill("SIGTERM")
    await exited(daemon)
  }
  if (!existsSync(cacheFile)) throw new Error("the daemon exited without writing it")
  // The daemon writes under its data directory's umask; every user who runs mnemos reads it.
  chmodSync(cacheFile, 0o644)
}

const dataDir = mkdtempSync(join(tmpdir(), "mnemos-code-cache-"))
const timeout = setTimeout(() => {
  console.error(`code cache: not written (no answer in ${runTimeoutMs / 1000} s); mnemos starts slower without it`)
  for (const child of children) child.kill("SIGKILL")
  rmSync(cacheFile, { force: true })
  rmSync(dataDir, { recursive: true, force: true })
  process.exit(0)
}, runTimeoutMs)
try {
  await train(dataDir)
  console.log(`code cache: ${cacheFile}`)
} catch (error) {
  console.error(`code cache: not written (${error.message}); mnemos starts slower without it`)
} finally {
  clearTimeout(timeout)
  rmSync(dataDir, { recursive: true, force: true })
}
