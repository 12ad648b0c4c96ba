/**
 * Gates: push safety. A gate says whether an action (e.g. "push") is `authorized`, `blocked` or
 * `pending` in a namespace (a project, e.g. a repository's name), with a reason and an optional
 * expiry. `verifyGate` is what a git wrapper asks before pushing; the MCP tools, the REST routes
 * (`/gate/verify`, `/gate/set`) and `mnemos gate` all run the functions here.
 *
 * Verdicts: `authorized` (exit 0, HTTP 200); `blocked`, `pending` and `expired` (an authorization
 * whose expiry has passed) (exit 1, HTTP 403); `not_found` (exit 2, HTTP 404).
 *
 * Consuming. `verify` with `consume` turns an authorization into `pending` in the same step, so
 * one authorization lets exactly one action through: the change is conditioned on the revision
 * that was judged, and when two verifiers race, one wins and the other re-reads and sees
 * `pending`. A retried consume (same idempotency key) is answered with its first verdict.
 */
import { Clock, Effect, Schema } from "effect"
import { Router } from "../actors/Router.ts"
import { rememberedReply } from "../stores/Idempotency.ts"
import type { StoreError } from "../stores/StoreError.ts"
import { EpochMillis, Text, Title, text, title } from "./Fields.ts"
import { getByUnique, listRecords, listScanRecordsMax } from "./RecordQueries.ts"
import {
  dataOf,
  defineKind,
  makeRecordStore,
  type RecordRejected,
  type RecordReply,
  type StoredRecord,
} from "./RecordStore.ts"

/** Longest a gate may stay authorized by one `gate_set`: 30 days. */
export const gateExpirySecondsMax = 30 * 24 * 60 * 60
/** How often a consuming verify re-reads after losing a race before it answers. */
export const gateConsumeAttemptsMax = 3

export const gateStatuses = ["authorized", "blocked", "pending"] as const
export const GateStatus = Schema.Literals(gateStatuses)
export type GateStatus = typeof GateStatus.Type

/** What a verify answers. */
export const gateVerdicts = ["authorized", "blocked", "pending", "expired", "not_found"] as const
export type GateVerdictStatus = (typeof gateVerdicts)[number]

export const GateData = Schema.Struct({
  action: Title,
  status: GateStatus,
  reason: Schema.optionalKey(Text),
  expiresAt: Schema.optionalKey(EpochMillis),
  consumedAt: Schema.optionalKey(EpochMillis),
  consumedBy: Schema.optionalKey(Title),
})
export type GateData = typeof GateData.Type

export const gateKind = defineKind<GateData>({
  name: "gate",
  data: GateData,
  uniqueBy: (gate) => gate.action,
  title: (gate) => `${gate.action}: ${gate.status}${gate.reason !== undefined ? ` (${gate.reason})` : ""}`,
  namedBy: (gate) => `${gate.action}: ${gate.status}`,
  text: (gate) => [gate.action, gate.reason],
})

export const gatesStore = makeRecordStore("gates", [gateKind])

/** The answer to "may this action proceed?". */
export interface GateVerdict {
  readonly namespace: string
  readonly action: string
  readonly status: GateVerdictStatus
  readonly authorized: boolean
  /** True when this verify used up the authorization. */
  readonly consumed: boolean
  readonly gate?: StoredRecord
}

/** Who changes gates, for the record and the audit ledger. */
export interface GateCaller {
  readonly by: string
  readonly tool: string
  readonly idempotencyKey?: string | undefined
}

/** The verdict a gate record gives at `now`. */
export const verdictOf = (gate: StoredRecord | undefined, now: number): GateVerdictStatus => {
  if (gate === undefined) return "not_found"
  const data = dataOf(gateKind, gate)
  if (data.status === "authorized" && data.expiresAt !== undefined && data.expiresAt <= now) return "expired"
  return data.status
}

/** The CLI's exit code for a verdict: 0 authorized, 1 blocked/pending/expired, 2 not found. */
export const gateExitCode = (status: GateVerdictStatus): 0 | 1 | 2 =>
  status === "authorized" ? 0 : status === "not_found" ? 2 : 1

/** The HTTP status for a verdict: 200, 403 or 404. */
export const gateHttpStatus = (status: GateVerdictStatus): 200 | 403 | 404 =>
  status === "authorized" ? 200 : status === "not_found" ? 404 : 403

/** What `gate_set` takes (tool arguments, `POST /gate/set` bodies). */
export const GateSetInput = Schema.Struct({
  action: title('The guarded action, e.g. "push" or "deploy"'),
  status: GateStatus.annotate({ description: "authorized lets the action proceed; blocked and pending stop it" }),
  namespace: Schema.optionalKey(title("Where the gate applies, e.g. the repository name; defaults to the project")),
  reason: Schema.optionalKey(text("Why, shown to whoever is stopped or let through")),
  expires_in_seconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: gateExpirySecondsMax })).annotate({
      description: "An authorization lapses (verdict expired) after this many seconds",
    }),
  ),
})
export type GateSetInput = typeof GateSetInput.Type

/** What `gate_verify` takes. */
export const GateVerifyInput = Schema.Struct({
  action: title('The action about to run, e.g. "push"'),
  namespace: Schema.optionalKey(title("Defaults to the project")),
  consume: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "Use the authorization up: it lets exactly one action through" }),
  ),
})
export type GateVerifyInput = typeof GateVerifyInput.Type

const store = Effect.gen(function* () {
  return (yield* Router).store(gatesStore)
})

/** Sets (creates or replaces) the gate of `action` in `namespace`. */
export const setGate = (
  namespace: string,
  input: GateSetInput,
  caller: GateCaller,
): Effect.Effect<StoredRecord, RecordRejected | StoreError, Router> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const data: GateData = {
      action: input.action,
      status: input.status,
      ...(input.reason !== undefined ? { reason: input.reason } : {}),
      ...(input.expires_in_seconds !== undefined ? { expiresAt: now + input.expires_in_seconds * 1000 } : {}),
    }
    const gates = yield* store
    const reply = yield* gates.send(
      { project: namespace, by: caller.by, tool: caller.tool, ops: [{ _tag: "Upsert", kind: gateKind.name, data }] },
      { idempotencyKey: caller.idempotencyKey },
    )
    return reply.records[0]!
  })

/** Answers whether `action` may proceed in `namespace`, consuming the authorization if asked. */
export const verifyGate = (
  namespace: string,
  input: GateVerifyInput,
  caller: GateCaller,
): Effect.Effect<GateVerdict, RecordRejected | StoreError, Router> =>
  Effect.gen(function* () {
    const gates = yield* store
    const consume = input.consume === true
    const verdict = (gate: StoredRecord | undefined, status: GateVerdictStatus, consumed: boolean): GateVerdict => ({
      namespace,
      action: input.action,
      status,
      authorized: status === "authorized",
      consumed,
      ...(gate !== undefined ? { gate } : {}),
    })
    const key = caller.idempotencyKey
    if (consume && key !== undefined) {
      const remembered = yield* gates.read((view) => rememberedReply(view, key))
      if (remembered !== undefined) return verdict((remembered.reply as RecordReply).records[0], "authorized", true)
    }
    for (let attempt = 1; ; attempt++) {
      const now = yield* Clock.currentTimeMillis
      const gate = yield* gates.read((view) => getByUnique(view, namespace, gateKind, input.action))
      const status = verdictOf(gate, now)
      if (!consume || status !== "authorized" || gate === undefined) return verdict(gate, status, false)
      const outcome = yield* gates
        .send(
          {
            project: namespace,
            by: caller.by,
            tool: caller.tool,
            ops: [
              {
                _tag: "Update",
                kind: gateKind.name,
                id: gate.id,
                expectedRevision: gate.revision,
                patch: { status: "pending", consumedAt: now, consumedBy: caller.by },
              },
            ],
          },
          { idempotencyKey: key },
        )
        .pipe(Effect.result)
      if (outcome._tag === "Success") return verdict(outcome.success.records[0], "authorized", true)
      const error = outcome.failure
      if (error._tag !== "RecordRejected" || error.reason !== "Conflict" || attempt >= gateConsumeAttemptsMax)
        return yield* Effect.fail(error)
    }
  })

/** A gate with the verdict it gives now. */
export interface GateState {
  readonly gate: StoredRecord
  readonly verdict: GateVerdictStatus
}

/** Every live gate of `namespace`, oldest first, with its current verdict. */
export const listGates = (namespace: string): Effect.Effect<ReadonlyArray<GateState>, StoreError, Router> =>
  Effect.gen(function* () {
    const gates = yield* store
    const now = yield* Clock.currentTimeMillis
    const page = yield* gates.read((view) =>
      listRecords(view, { project: namespace, kind: gateKind, newestFirst: false, limit: listScanRecordsMax }),
    )
    return page.records.map((gate) => ({ gate, verdict: verdictOf(gate, now) }))
  })
