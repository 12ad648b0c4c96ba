/**
 * Real NATS JetStream servers for the shared-memory tests: Debian's `nats-server` (installed by
 * .ci/run), started on loopback on free ports, each with its own JetStream store directory — a
 * single server, or a cluster of several that forms routes between them. Nodes can be stopped,
 * killed (-9) and started again on the same ports and directories. Nothing is mocked.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect } from "@nats-io/transport-node"

/** One server of a cluster. */
export interface NatsNode {
  readonly name: string
  readonly clientPort: number
  readonly url: string
  readonly running: () => boolean
  /** Stops it with `signal` (SIGKILL for a crash) and waits for the exit. */
  readonly stop: (signal?: NodeJS.Signals) => Promise<void>
  /** Starts it again on the same ports and directory. */
  readonly start: () => Promise<void>
}

/** Servers started together. */
export interface NatsCluster {
  readonly nodes: ReadonlyArray<NatsNode>
  /** Every node's URL, for a client that should reach any of them. */
  readonly urls: ReadonlyArray<string>
  /** The directory holding every node's configuration and JetStream store directory. */
  readonly dir: string
  readonly stop: () => Promise<void>
}

/** The `nats-server` binary, or a clear failure naming how to install it. */
export const natsServerBinary = (): string => {
  try {
    execFileSync("nats-server", ["--version"], { stdio: "ignore" })
    return "nats-server"
  } catch {
    throw new Error(
      "nats-server is not installed: the shared-memory tests start real JetStream servers (Debian: apt-get install nats-server; .ci/run does it)",
    )
  }
}

/** Whether `port` can be listened on (on loopback) right now; it is let go at once. */
const canListen = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/**
 * The lowest port the kernel hands out as a connection's own (Linux's `ip_local_port_range`). A
 * free port below it stays free until nats-server binds it: a port the kernel chose (`listen(0)`)
 * is one of those it also gives outgoing connections, and the suite's many daemons and clients
 * took one between its check and nats-server's bind ("address already in use").
 */
const ephemeralPortsFrom = (): number => {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]) || 32768
  } catch {
    return 32768
  }
}

const taken = new Set<number>()
/** A free loopback port outside the kernel's ephemeral range, not handed out before in this process. */
const freePort = async (): Promise<number> => {
  const high = ephemeralPortsFrom()
  const low = Math.min(10_000, high - 1_000)
  for (let attempt = 0; attempt < 1_000; attempt++) {
    const port = low + Math.floor(Math.random() * (high - low))
    if (taken.has(port) || !(await canListen(port))) continue
    taken.add(port)
    return port
  }
  throw new Error(`no free port between ${low} and ${high}`)
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** How the servers are started. */
export interface NatsClusterOptions {
  /**
   * Servers do not tell clients of each other (`no_advertise`): a client reaches only the servers it
   * was given, so a daemon given one node is cut off from NATS when that node goes.
   */
  readonly noAdvertise?: boolean
}

/** Starts `size` servers (a cluster when more than one) and waits until JetStream answers on each. */
export const startNatsCluster = async (size = 3, options: NatsClusterOptions = {}): Promise<NatsCluster> => {
  const binary = natsServerBinary()
  const root = mkdtempSync(join(process.env.MNEMOS_TEST_DIR ?? tmpdir(), "mnemos-nats-"))
  const ports = await Promise.all(
    Array.from({ length: size }, async () => ({ client: await freePort(), route: await freePort() })),
  )
  const routes = ports.map(({ route }) => `nats-route://127.0.0.1:${route}`)
  const nodes = ports.map(({ client, route }, index): NatsNode => {
    const name = `n${index + 1}`
    const config = join(root, `${name}.conf`)
    writeFileSync(
      config,
      [
        `server_name: ${name}`,
        `listen: 127.0.0.1:${client}`,
        `jetstream { store_dir: "${join(root, name)}" }`,
        ...(size > 1
          ? [
              `cluster { name: mnemos-test, listen: 127.0.0.1:${route}, routes: [${routes.join(", ")}]${options.noAdvertise === true ? ", no_advertise: true" : ""} }`,
            ]
          : []),
      ].join("\n"),
    )
    let child: ChildProcess | undefined
    let exited: Promise<void> = Promise.resolve()
    const start = async () => {
      child = spawn(binary, ["-c", config], { stdio: ["ignore", "ignore", "pipe"] })
      let stderr = ""
      child.stderr?.on("data", (chunk) => (stderr += chunk))
      const running = child
      exited = new Promise((resolve) => running.once("exit", () => resolve()))
      for (let attempt = 0; attempt < 100; attempt++) {
        if (running.exitCode !== null) throw new Error(`nats-server ${name} exited: ${stderr}`)
        try {
          const connection = await connect({ servers: `127.0.0.1:${client}`, timeout: 500, reconnect: false })
          await connection.close()
          return
        } catch {
          await sleep(100)
        }
      }
      throw new Error(`nats-server ${name} did not answer on ${client}: ${stderr}`)
    }
    return {
      name,
      clientPort: client,
      url: `nats://127.0.0.1:${client}`,
      running: () => child !== undefined && child.exitCode === null && child.signalCode === null,
      stop: async (signal = "SIGTERM") => {
        if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
        child.kill(signal)
        await exited
      },
      start,
    }
  })
  await Promise.all(nodes.map((node) => node.start()))
  if (size > 1) await waitForJetStreamCluster(nodes)
  return {
    nodes,
    urls: nodes.map((node) => node.url),
    dir: root,
    stop: async () => {
      await Promise.all(nodes.map((node) => node.stop("SIGKILL")))
      rmSync(root, { recursive: true, force: true })
    },
  }
}

/** Waits until the cluster has a JetStream meta leader (streams can be created with replicas). */
const waitForJetStreamCluster = async (nodes: ReadonlyArray<NatsNode>) => {
  const { jetstreamManager } = await import("@nats-io/jetstream")
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      const connection = await connect({ servers: nodes.map((node) => node.url), timeout: 1000 })
      try {
        const manager = await jetstreamManager(connection)
        await manager.getAccountInfo()
        return
      } finally {
        await connection.close()
      }
    } catch {
      await sleep(200)
    }
  }
  throw new Error("the NATS cluster did not elect a JetStream leader")
}
