/**
 * The engineering tools: a project's tasks, decisions, notes, handoffs, workspaces, code
 * history, environments, push gates and audit ledger, by toolset:
 *
 *   tasks        add_task, update_task, complete_task, list_tasks
 *   decisions    record_adr, update_adr, list_adrs
 *   context      sticky notes, session summaries, handoffs, context workspaces, pin_file/unpin_file
 *   engineering  log_code_change, log_error_fix, log_tech_debt, add_snippet, PR checklists,
 *                register_environment, add_milestone, list_engineering_records
 *   gates        gate_set, gate_verify, gate_list
 *   audit        query_audit
 *
 * Every tool acts in the connection's project unless it names one, records who called it (the
 * MCP client) and through which tool, and answers failures with the JSON error envelope. Tools
 * that change a record take `expected_revision` and fail with CONFLICT when it is stale.
 */
import type { Router } from "../actors/Router.ts"
import type { AuditLedger } from "../engineering/AuditLedger.ts"
import { archiveRoutinePrompt } from "./engineering/ArchivePrompt.ts"
import { auditTools } from "./engineering/AuditTools.ts"
import { codeHistoryTools } from "./engineering/CodeHistoryTools.ts"
import { decisionTools } from "./engineering/DecisionTools.ts"
import { gateTools } from "./engineering/GateTools.ts"
import { noteTools } from "./engineering/NoteTools.ts"
import { taskTools } from "./engineering/TaskTools.ts"
import { workspaceTools } from "./engineering/WorkspaceTools.ts"
import type { McpPrompt, Tool } from "./Tool.ts"

/** Every engineering tool, by toolset. */
export const engineeringTools: ReadonlyArray<Tool<never, Router | AuditLedger>> = [
  ...taskTools,
  ...decisionTools,
  ...noteTools,
  ...workspaceTools,
  ...codeHistoryTools,
  ...gateTools,
  ...auditTools,
] as never

/** The engineering prompts. */
export const engineeringPrompts: ReadonlyArray<McpPrompt> = [archiveRoutinePrompt]
