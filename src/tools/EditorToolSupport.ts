/**
 * What the editor toolset's tools share: how they are defined (toolset "editor", errors in the
 * JSON envelope, an object input schema even without arguments) and how path arguments resolve.
 */
import { isAbsolute, resolve } from "node:path"
import { Schema } from "effect"
import { isMaxUtf8Bytes } from "../graph/Model.ts"
import { describedDefinition, makeTool, type Tool, type ToolCaller, type ToolDescription } from "./Tool.ts"

/** Longest path argument. */
export const pathBytesMax = 4 * 1024

/** A 1-based line or column number argument. */
export const lineNumber = (description: string) =>
  Schema.Int.annotate({ description }).check(Schema.isBetween({ minimum: 1, maximum: 2 ** 31 - 1 }))
/** A file path argument. */
export const pathArg = (description: string) =>
  Schema.String.annotate({ description }).check(Schema.isMinLength(1), isMaxUtf8Bytes(pathBytesMax))

/** Makes a tool of the `editor` toolset (errors in the JSON envelope). */
export const editorTool = <Args>(
  definition: ToolDescription,
  args: Schema.Codec<Args, unknown> & Schema.Top,
  run: Tool<Args, never>["run"],
): Tool<Args, never> =>
  makeTool({ definition: describedDefinition(definition, args), toolset: "editor", errorFormat: "envelope", args, run })

/** A path as the caller meant it: absolute, or relative to the caller's root directory. */
export const resolvePath = (path: string, caller: ToolCaller): string | undefined =>
  isAbsolute(path) ? path : caller.rootDir !== undefined ? resolve(caller.rootDir, path) : undefined
