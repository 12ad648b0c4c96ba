/**
 * The gate tools (toolset `gates`): gate_set, gate_verify, gate_list (see Gates.ts).
 */
import { Effect, Schema } from "effect"
import { title } from "../../engineering/Fields.ts"
import { GateSetInput, GateVerifyInput, listGates, setGate, verifyGate } from "../../engineering/Gates.ts"
import { presentRecord } from "../../engineering/RecordQueries.ts"
import { engineeringTool, one, toToolError } from "../../engineering/ToolSupport.ts"
import type { ToolCaller } from "../Tool.ts"

const optional = Schema.optionalKey

const gateCaller = (caller: ToolCaller, tool: string) => ({
  by: caller.client,
  tool,
  idempotencyKey: caller.idempotencyKey,
})

/** The gate tools. */
export const gateTools = [
  engineeringTool(
    "gates",
    {
      name: "gate_set",
      title: "Set Gate",
      description:
        "Authorize, block or hold (pending) an action such as push in a namespace (default: the project). Set authorized only after checks passed (tests green, history clean); git push is refused unless authorized.",
      idempotent: true,
    },
    GateSetInput,
    (args, caller) =>
      setGate(args.namespace ?? caller.project, args, gateCaller(caller, "gate_set")).pipe(
        Effect.mapError(toToolError),
        Effect.map((gate) => one("gate", gate)),
      ),
  ),
  engineeringTool(
    "gates",
    {
      name: "gate_verify",
      title: "Verify Gate",
      description:
        "Ask whether an action may proceed: status authorized, blocked, pending, expired or not_found. With consume, an authorization lets exactly one action through.",
    },
    GateVerifyInput,
    (args, caller) =>
      verifyGate(args.namespace ?? caller.project, args, gateCaller(caller, "gate_verify")).pipe(
        Effect.mapError(toToolError),
        Effect.map((verdict) => ({
          structured: {
            namespace: verdict.namespace,
            action: verdict.action,
            status: verdict.status,
            authorized: verdict.authorized,
            consumed: verdict.consumed,
            gate: verdict.gate === undefined ? null : presentRecord(verdict.gate),
          },
        })),
      ),
  ),
  engineeringTool(
    "gates",
    {
      name: "gate_list",
      title: "List Gates",
      description: "Every gate of a namespace with its current status.",
      readOnly: true,
    },
    Schema.Struct({ namespace: optional(title("Default: the project")) }),
    (args, caller) =>
      listGates(args.namespace ?? caller.project).pipe(
        Effect.mapError(toToolError),
        Effect.map((gates) => ({
          structured: { gates: gates.map(({ gate, verdict }) => ({ ...presentRecord(gate), verdict })) },
        })),
      ),
  ),
]
