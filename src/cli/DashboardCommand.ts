/**
 * `mnemos dashboard`: prints a fresh one-time login link to the dashboard of the daemon that
 * serves the data directory, and with `--open` opens it in the default browser.
 *
 * The daemon is found through the data directory's `daemon.json` (else `--host`/`--port`) and
 * must answer `/ping` for this very directory. The link is minted by the daemon
 * (`POST /api/dashboard/token`) with the data directory's bearer token, so only someone who can
 * read the data directory can log in. The link works once; the browser keeps a session cookie.
 */
import { spawn } from "node:child_process"
import { Console, Effect, Option, Schema } from "effect"
import { Command, Flag } from "effect/cli"
import { resolveDataDir } from "../stores/datadir/DataDir.ts"
import { defaultHost, ensureToken, ping, readDaemonInfo } from "../transports/Daemon.ts"
import { dataDirFlag, portFlag } from "./ServeCommand.ts"

/** How long minting a login link may take. */
export const mintTimeoutMs = 5_000

/** No link could be made. */
export class DashboardUnavailable extends Schema.TaggedError<DashboardUnavailable>()("DashboardUnavailable", {
  message: Schema.String,
}) {}

const MintAnswer = Schema.Struct({ token: Schema.String, path: Schema.String })

const hostInUrl = (host: string) => (host.includes(":") && !host.startsWith("[") ? `[${host}]` : host)

/** Asks the daemon at `base` for a login path. */
const mintLoginPath = (base: string, bearerToken: string) =>
  Effect.tryPromise({
    try: async () => {
      const response = await fetch(`${base}/api/dashboard/token`, {
        method: "POST",
        headers: { authorization: `Bearer ${bearerToken}` },
        signal: AbortSignal.timeout(mintTimeoutMs),
      })
      if (!response.ok) throw new Error(`the daemon answered ${response.status}: ${await response.text()}`)
      return (await response.json()) as unknown
    },
    catch: (error) =>
      new DashboardUnavailable({
        message: `could not get a login link from ${base}: ${error instanceof Error ? error.message : String(error)}`,
      }),
  }).pipe(
    Effect.flatMap((answer) =>
      Schema.decodeUnknownEffect(MintAnswer)(answer).pipe(
        Effect.mapError(() => new DashboardUnavailable({ message: `${base} answered something unexpected` })),
      ),
    ),
  )

/** Opens `url` in the default browser; never fails (the link is printed anyway). */
const openInBrowser = (url: string) =>
  Effect.sync(() => {
    const [command, args] =
      process.platform === "darwin"
        ? ["open", [url]]
        : process.platform === "win32"
          ? ["cmd", ["/c", "start", "", url]]
          : ["xdg-open", [url]]
    try {
      const child = spawn(command, args as Array<string>, { detached: true, stdio: "ignore" })
      child.on("error", () => undefined)
      child.unref()
      return true
    } catch {
      return false
    }
  })

/** `mnemos dashboard [--open]`. */
export const dashboardCommand = Command.make(
  "dashboard",
  {
    dataDir: dataDirFlag,
    port: portFlag,
    host: Flag.String("host").pipe(
      Flag.withDescription(`Address of the daemon when the data directory does not say (default ${defaultHost})`),
      Flag.withDefault(defaultHost),
    ),
    open: Flag.Boolean("open").pipe(
      Flag.withDescription("Open the link in the default browser"),
      Flag.withDefault(false),
    ),
  },
  Effect.fn(function* ({ dataDir, port, host, open }) {
    const location = resolveDataDir(Option.getOrUndefined(dataDir))
    const info = readDaemonInfo(location.path)
    const target = info !== undefined ? { host: info.host, port: info.port } : { host, port }
    const answer = yield* Effect.promise(() => ping(target.host, target.port))
    if (answer === undefined || answer.dataDir !== location.path)
      return yield* new DashboardUnavailable({
        message: `no mnemos daemon serves ${location.path} on ${target.host}:${target.port}; start one with: mnemos serve --data-dir ${location.path}`,
      })
    const base = `http://${hostInUrl(target.host)}:${target.port}`
    const minted = yield* mintLoginPath(base, ensureToken(location.path))
    const url = `${base}${minted.path}`
    yield* Console.log(url)
    if (open && !(yield* openInBrowser(url))) yield* Console.error("could not start a browser; open the link above")
  }),
).pipe(Command.withDescription("Print (and with --open, open) a one-time login link to the daemon's live dashboard"))
