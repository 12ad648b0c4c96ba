/**
 * The names of the toolsets, in `tools/list` order: what `mnemos serve --toolsets` accepts. A leaf
 * module, so the command line can describe and check them without loading the tool catalogue
 * (and with it the engine); test/cli/ServeCommand.test.ts checks that it names the catalogue's.
 */

/** Every toolset, in `tools/list` order (Catalogue.ts's `toolsets`). */
export const toolsetNames: ReadonlyArray<string> = [
  "graph",
  "conversations",
  "tasks",
  "decisions",
  "context",
  "engineering",
  "gates",
  "audit",
  "search",
  "editor",
]
