/**
 * The MCP tool catalogue: every tool mnemos offers, in `tools/list` order, grouped in toolsets
 * (`mnemos serve --toolsets a,b` chooses which ones `tools/list` shows), and the prompts that
 * come with them.
 */
import { conversationTools } from "./ConversationTools.ts"
import { editorTools } from "./EditorTools.ts"
import { engineeringPrompts, engineeringTools } from "./EngineeringTools.ts"
import { graphTools } from "./GraphTools.ts"
import { searchTools } from "./SearchTools.ts"
import type { McpPrompt, SessionServices, Tool } from "./Tool.ts"

/** Every tool. */
export const catalogue: ReadonlyArray<Tool<never, SessionServices>> = [
  ...graphTools,
  ...conversationTools,
  ...engineeringTools,
  ...searchTools,
  ...editorTools,
]

/** Every toolset, in `tools/list` order. */
export const toolsets: ReadonlyArray<string> = [...new Set(catalogue.map((tool) => tool.toolset))]

/** The toolsets shown when `--toolsets` is not given (docs/tools.md records their size). */
export const defaultToolsets: ReadonlyArray<string> = toolsets

/** The tools of the named toolsets, in catalogue order; unknown names are returned as `unknown`. */
export const selectTools = (
  names: ReadonlyArray<string>,
): { readonly tools: ReadonlyArray<Tool<never, SessionServices>>; readonly unknown: ReadonlyArray<string> } => ({
  tools: catalogue.filter((tool) => names.includes(tool.toolset)),
  unknown: names.filter((name) => !toolsets.includes(name)),
})

/** Every prompt; a session offers those whose toolset it has tools of. */
export const prompts: ReadonlyArray<McpPrompt> = [...engineeringPrompts]

/** The prompts that go with `tools`. */
export const promptsFor = (tools: ReadonlyArray<Tool<never, SessionServices>>): ReadonlyArray<McpPrompt> =>
  prompts.filter((prompt) => tools.some((tool) => tool.toolset === prompt.toolset))
