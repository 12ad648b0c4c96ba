/**
 * `mnemos gate set|verify|list`: push-safety gates from shells, git wrappers and CI.
 *
 * Works through the daemon when one owns the data directory (`daemon.json` names it and its
 * `/ping` confirms the same directory): then the command is an HTTP call to `/gate/*`, with the
 * bearer token when the data directory has one. Otherwise it opens the engine on the data
 * directory itself (taking its lock for the run). Either way the change is recorded in the audit
 * ledger as made by `cli:<user>`.
 *
 * `verify` exits 0 when the action is authorized, 1 when it is blocked, pending or expired (or
 * the answer cannot be had: fail closed), and 2 when no gate exists. The namespace defaults to
 * the name of the Git repository around the working directory (what an MCP client rooted there
 * calls its project), else "default".
 */
import { request } from "node:http"
import { userInfo } from "node:os"
import { basename } from "node:path"
import { Console, Effect, Layer, Option, Schema } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import type { Router } from "../actors/Router.ts"
import * as Engine from "../Engine.ts"
import {
  GateSetInput,
  gateExitCode,
  gateExpirySecondsMax,
  gateStatuses,
  gateVerdicts,
  listGates,
  setGate,
  verifyGate,
} from "../engineering/Gates.ts"
import { readGitContext } from "../engineering/GitContext.ts"
import { presentRecord } from "../engineering/RecordQueries.ts"
import { defaultProjectName } from "../graph/Model.ts"
import { resolveDataDir } from "../stores/datadir/DataDir.ts"
import { ping, readDaemonInfo, readToken } from "../transports/Daemon.ts"
import { CommandExit } from "./Main.ts"
import { dataDirFlag } from "./ServeCommand.ts"

/** How long an HTTP call to the daemon may take. */
export const gateHttpTimeoutMs = 10_000
/** Largest daemon answer read. */
const answerBytesMax = 4 * 1024 * 1024

/** The gate command could not get an answer; the message says why. */
export class GateFailed extends Schema.TaggedError<GateFailed>()("GateFailed", { message: Schema.String }) {}

const GateJson = Schema.Record(Schema.String, Schema.Unknown)
/** What `verify` answers, over HTTP or directly. */
const VerdictAnswer = Schema.Struct({
  namespace: Schema.String,
  action: Schema.String,
  status: Schema.Literals(gateVerdicts),
  authorized: Schema.Boolean,
  consumed: Schema.Boolean,
  gate: Schema.NullOr(GateJson),
})
type VerdictAnswer = typeof VerdictAnswer.Type
const SetAnswer = Schema.Struct({ gate: GateJson })
const ListAnswer = Schema.Struct({
  namespace: Schema.String,
  gates: Schema.Array(GateJson),
})
const ErrorAnswer = Schema.Struct({ error: Schema.String })

const who = (): string => {
  try {
    return `cli:${userInfo().username}`
  } catch {
    return "cli"
  }
}

/** The data directory's daemon, if one answers for it. */
const daemonFor = (dataDir: string) =>
  Effect.promise(async () => {
    const info = readDaemonInfo(dataDir)
    if (info === undefined) return undefined
    const answer = await ping(info.host, info.port)
    return answer?.dataDir === dataDir ? info : undefined
  })

/** One HTTP call to the daemon; resolves with the status and parsed JSON body. */
const callDaemon = (
  daemon: { readonly host: string; readonly port: number },
  token: string | undefined,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
) =>
  Effect.callback<{ status: number; body: unknown }, GateFailed>((resume) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = request(
      {
        host: daemon.host,
        port: daemon.port,
        path,
        method,
        timeout: gateHttpTimeoutMs,
        headers: {
          host: `${daemon.host.includes(":") ? `[${daemon.host}]` : daemon.host}:${daemon.port}`,
          "x-mnemos-client": who(),
          ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
          ...(payload !== undefined
            ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) }
            : {}),
        },
      },
      (res) => {
        const chunks: Array<Buffer> = []
        let size = 0
        res.on("data", (chunk: Buffer) => {
          size += chunk.length
          if (size <= answerBytesMax) chunks.push(chunk)
        })
        res.on("end", () => {
          try {
            resume(Effect.succeed({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) }))
          } catch {
            resume(
              Effect.fail(new GateFailed({ message: `the daemon answered ${path} with something that is not JSON` })),
            )
          }
        })
      },
    )
    req.on("timeout", () => req.destroy(new Error(`no answer within ${gateHttpTimeoutMs} ms`)))
    req.on("error", (error) =>
      resume(Effect.fail(new GateFailed({ message: `cannot reach the daemon: ${error.message}` }))),
    )
    req.end(payload)
    return Effect.sync(() => void req.destroy())
  })

/** Decodes a daemon answer: `schema` for the expected statuses, else its error message. */
const decodeAnswer = <A>(
  answer: { status: number; body: unknown },
  okStatuses: ReadonlyArray<number>,
  schema: Schema.Codec<A, unknown>,
) => {
  if (!okStatuses.includes(answer.status)) {
    const error = Schema.decodeUnknownOption(ErrorAnswer)(answer.body)
    return Effect.fail(
      new GateFailed({
        message: `the daemon refused (HTTP ${answer.status}): ${Option.match(error, {
          onNone: () => "no reason given",
          onSome: (value) => value.error,
        })}`,
      }),
    )
  }
  return Schema.decodeUnknownEffect(schema)(answer.body).pipe(
    Effect.mapError((issue) => new GateFailed({ message: `unexpected daemon answer: ${issue.message}` })),
  )
}

/** Runs an engine operation on the data directory itself (no daemon owns it). */
const direct = <A, E extends { readonly message: string }>(dataDir: string, operation: Effect.Effect<A, E, Router>) =>
  operation.pipe(
    Effect.mapError((error) => new GateFailed({ message: error.message })),
    Effect.provide(Layer.fresh(Engine.layer({ dataDir, command: "mnemos gate" }))),
    Effect.mapError((error) => (error instanceof GateFailed ? error : new GateFailed({ message: error.message }))),
  )

/** The namespace: the flag, else the Git repository's name around the working directory. */
const namespaceOf = (flag: Option.Option<string>) =>
  Option.isSome(flag)
    ? Effect.succeed(flag.value)
    : readGitContext(process.cwd()).pipe(
        Effect.map((git) => basename(git.root)),
        Effect.orElseSucceed(() => defaultProjectName),
      )

const namespaceFlag = Flag.String("namespace").pipe(
  Flag.withDescription("Where the gate applies (default: the Git repository's name, else default)"),
  Flag.optional,
)
const jsonFlag = Flag.Boolean("json").pipe(Flag.withDescription("Print the answer as JSON"), Flag.withDefault(false))
const actionArgument = Argument.String("action").pipe(Argument.withDescription('The guarded action, e.g. "push"'))

const describeGate = (gate: Readonly<Record<string, unknown>> | null): string => {
  if (gate === null) return ""
  const parts = [
    typeof gate.reason === "string" ? `reason: ${gate.reason}` : undefined,
    typeof gate.expiresAt === "string" ? `expires ${gate.expiresAt}` : undefined,
    typeof gate.updatedBy === "string" ? `set by ${gate.updatedBy}` : undefined,
  ].filter((part) => part !== undefined)
  return parts.length > 0 ? ` (${parts.join("; ")})` : ""
}

const verifyCommand = Command.make(
  "verify",
  {
    action: actionArgument,
    namespace: namespaceFlag,
    consume: Flag.Boolean("consume").pipe(
      Flag.withDescription("Use the authorization up: it lets exactly one action through"),
      Flag.withDefault(false),
    ),
    json: jsonFlag,
    dataDir: dataDirFlag,
  },
  Effect.fn(function* ({ action, namespace: namespaceOption, consume, json, dataDir: dataDirOption }) {
    const dataDir = resolveDataDir(Option.getOrUndefined(dataDirOption)).path
    const namespace = yield* namespaceOf(namespaceOption)
    const daemon = yield* daemonFor(dataDir)
    const answer: VerdictAnswer =
      daemon !== undefined
        ? yield* callDaemon(
            daemon,
            readToken(dataDir),
            "GET",
            `/gate/verify?${new URLSearchParams({ action, namespace, ...(consume ? { consume: "1" } : {}) })}`,
          ).pipe(Effect.flatMap((reply) => decodeAnswer(reply, [200, 403, 404], VerdictAnswer)))
        : yield* direct(
            dataDir,
            verifyGate(namespace, { action, consume }, { by: who(), tool: "mnemos gate verify" }).pipe(
              Effect.map(({ gate, ...verdict }) => ({
                ...verdict,
                gate: gate === undefined ? null : presentRecord(gate),
              })),
            ),
          )
    yield* Console.log(
      json
        ? JSON.stringify(answer)
        : `${answer.action} in ${answer.namespace}: ${answer.status}${describeGate(answer.gate)}${answer.consumed ? " — authorization used" : ""}`,
    )
    const exitCode = gateExitCode(answer.status)
    if (exitCode !== 0) return yield* new CommandExit({ exitCode, message: "" })
  }),
).pipe(
  Command.withDescription(
    "Is the action authorized? Exit 0 authorized, 1 blocked/pending/expired (or no answer), 2 no such gate",
  ),
)

const setCommand = Command.make(
  "set",
  {
    action: actionArgument,
    status: Flag.Literals("status", gateStatuses).pipe(Flag.withDescription("authorized, blocked or pending")),
    namespace: namespaceFlag,
    reason: Flag.String("reason").pipe(Flag.withDescription("Why"), Flag.optional),
    expiresIn: Flag.Int("expires-in").pipe(
      Flag.withDescription(`Seconds until an authorization lapses (1 to ${gateExpirySecondsMax})`),
      Flag.optional,
    ),
    json: jsonFlag,
    dataDir: dataDirFlag,
  },
  Effect.fn(function* ({
    action,
    status,
    namespace: namespaceOption,
    reason,
    expiresIn,
    json,
    dataDir: dataDirOption,
  }) {
    const dataDir = resolveDataDir(Option.getOrUndefined(dataDirOption)).path
    const namespace = yield* namespaceOf(namespaceOption)
    const input = {
      action,
      status,
      namespace,
      ...(Option.isSome(reason) ? { reason: reason.value } : {}),
      ...(Option.isSome(expiresIn) ? { expires_in_seconds: expiresIn.value } : {}),
    }
    const daemon = yield* daemonFor(dataDir)
    const answer =
      daemon !== undefined
        ? yield* callDaemon(daemon, readToken(dataDir), "POST", "/gate/set", input).pipe(
            Effect.flatMap((reply) => decodeAnswer(reply, [200], SetAnswer)),
          )
        : yield* Schema.decodeUnknownEffect(GateSetInput)(input).pipe(
            Effect.mapError((issue) => new GateFailed({ message: issue.message })),
            Effect.flatMap((decoded) =>
              direct(
                dataDir,
                setGate(namespace, decoded, { by: who(), tool: "mnemos gate set" }).pipe(
                  Effect.map((gate) => ({ gate: presentRecord(gate) })),
                ),
              ),
            ),
          )
    yield* Console.log(
      json ? JSON.stringify(answer) : `${action} in ${namespace}: ${status}${describeGate(answer.gate)}`,
    )
  }),
).pipe(Command.withDescription("Authorize, block or hold an action"))

const listCommand = Command.make(
  "list",
  { namespace: namespaceFlag, json: jsonFlag, dataDir: dataDirFlag },
  Effect.fn(function* ({ namespace: namespaceOption, json, dataDir: dataDirOption }) {
    const dataDir = resolveDataDir(Option.getOrUndefined(dataDirOption)).path
    const namespace = yield* namespaceOf(namespaceOption)
    const daemon = yield* daemonFor(dataDir)
    const answer =
      daemon !== undefined
        ? yield* callDaemon(daemon, readToken(dataDir), "GET", `/gate/list?${new URLSearchParams({ namespace })}`).pipe(
            Effect.flatMap((reply) => decodeAnswer(reply, [200], ListAnswer)),
          )
        : yield* direct(
            dataDir,
            listGates(namespace).pipe(
              Effect.map((gates) => ({
                namespace,
                gates: gates.map(({ gate, verdict }) => ({ ...presentRecord(gate), verdict })),
              })),
            ),
          )
    if (json) return yield* Console.log(JSON.stringify(answer))
    if (answer.gates.length === 0) return yield* Console.log(`no gates in ${namespace}`)
    for (const gate of answer.gates as ReadonlyArray<Readonly<Record<string, unknown>>>)
      yield* Console.log(`${String(gate.action)} in ${namespace}: ${String(gate.verdict)}${describeGate(gate)}`)
  }),
).pipe(Command.withDescription("List the gates of a namespace with their verdicts"))

/** `mnemos gate`. */
export const gateCommand = Command.make("gate").pipe(
  Command.withDescription("Push-safety gates: set, verify (exit 0/1/2) and list"),
  Command.withSubcommands([setCommand, verifyCommand, listCommand]),
)
