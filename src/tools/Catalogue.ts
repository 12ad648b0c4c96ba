/**
 * The MCP tool catalogue: every tool mnemos offers, in `tools/list` order.
 */
import { graphTools } from "./GraphTools.ts"
import type { SessionServices } from "./McpSession.ts"
import type { Tool } from "./Tool.ts"

/** Every tool. */
export const catalogue: ReadonlyArray<Tool<never, SessionServices>> = [...graphTools]
