/**
 * Measuring other processes from outside, for the benchmarks: resident memory and CPU time from
 * /proc, peak RSS sampled while a command runs, free loopback ports, and waiting for a daemon's
 * `/ping`. Linux only (CI and the development machine are).
 */
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { createServer } from "node:net"
import { ping } from "../src/transports/Daemon.ts"

/** How often a running command's peak RSS is sampled (VmHWM is kept by the kernel; this only reads it). */
const samplePeriodMs = 20

/**
 * Memory of a live process, in bytes: now (VmRSS) and its peak so far (VmHWM); of VmRSS, what is
 * anonymous (heaps, buffers) and what is mapped files (node itself, LMDB's pages read through its
 * memory map: page cache the kernel may drop at any time).
 */
export interface MemorySample {
  readonly rssBytes: number
  readonly peakRssBytes: number
  readonly anonRssBytes: number
  readonly fileRssBytes: number
}

/** VmRSS and VmHWM of `pid`; undefined once it has gone. */
export const memoryOf = (pid: number): MemorySample | undefined => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, "m").exec(status)?.[1] ?? 0)
    return {
      rssBytes: kib("VmRSS") * 1024,
      peakRssBytes: kib("VmHWM") * 1024,
      anonRssBytes: kib("RssAnon") * 1024,
      fileRssBytes: kib("RssFile") * 1024,
    }
  } catch {
    return undefined
  }
}

/**
 * User + system CPU time of `pid` in ms — every thread, or with `mainThread` only the thread that
 * runs its event loop (the thread whose id is the pid); undefined once it has gone.
 */
export const cpuMsOf = (pid: number, options: { readonly mainThread?: boolean } = {}): number | undefined => {
  try {
    const stat = options.mainThread === true ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`
    // Fields after the command name (which may hold spaces) start at index 2 ("state").
    const fields = readFileSync(stat, "utf8").split(") ")[1]!.split(" ")
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100 // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return undefined
  }
}

/** A free TCP port on 127.0.0.1 whose successor is free too (the daemon takes UDP on port + 1). */
export const freePort = async (): Promise<number> => {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer()
      server.once("error", reject)
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as { port: number }
        server.close(() => resolve(port))
      })
    })
    if (port < 65_000) return port
  }
}

/** Resolves once a mnemos daemon answers `/ping` on `port` (polling every 5 ms), or rejects after `timeoutMs`. */
export const waitForPing = async (port: number, timeoutMs: number): Promise<void> => {
  const deadline = performance.now() + timeoutMs
  while ((await ping("127.0.0.1", port, 200)) === undefined) {
    if (performance.now() > deadline) throw new Error(`no daemon answered /ping on port ${port} in ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** What a command run to its end cost. */
export interface CommandRun {
  readonly ms: number
  readonly peakRssBytes: number
  readonly cpuMs: number
  readonly stdout: string
}

/**
 * Runs `node args...` to its end; wall time, peak RSS (VmHWM, sampled every `samplePeriodMs` and
 * read last just before the process is reaped) and CPU time. Rejects when it exits non-zero.
 */
export const runNode = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<CommandRun> =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const child = spawn(process.execPath, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    })
    let stdout = ""
    let stderr = ""
    let peakRssBytes = 0
    let cpuMs = 0
    child.stdout.on("data", (chunk) => {
      stdout += chunk
    })
    child.stderr.on("data", (chunk) => {
      stderr += chunk
    })
    const sample = () => {
      peakRssBytes = Math.max(peakRssBytes, memoryOf(child.pid!)?.peakRssBytes ?? 0)
      cpuMs = Math.max(cpuMs, cpuMsOf(child.pid!) ?? 0)
    }
    const poll = setInterval(sample, samplePeriodMs)
    child.on("exit", (code) => {
      clearInterval(poll)
      if (code !== 0) reject(new Error(`node ${args.join(" ")} exited ${code}: ${stderr.slice(-4000)}`))
      else resolve({ ms: performance.now() - started, peakRssBytes, cpuMs, stdout })
    })
  })
