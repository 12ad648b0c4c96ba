/**
 * The workspace tools (toolset `context`): save_context_workspace, load_context_workspace,
 * pin_file, unpin_file — a named set of pinned files, sticky notes and open tasks, saved and
 * restored, on the `notes` and `engineering` stores.
 */
import { Clock, Effect, Schema } from "effect"
import { engineeringStore, pinnedFileKind } from "../../engineering/CodeHistory.ts"
import { Files, filePath, RecordIds, text, title } from "../../engineering/Fields.ts"
import { isExpired, notesStore, stickyNoteKind, workspaceKind } from "../../engineering/Notes.ts"
import {
  getByUnique,
  getRecord,
  listRecords,
  listScanRecordsMax,
  presentRecord,
} from "../../engineering/RecordQueries.ts"
import { dataOf } from "../../engineering/RecordStore.ts"
import { openTaskStatuses, taskKind, tasksStore } from "../../engineering/Tasks.ts"
import {
  compact,
  described as d,
  engineeringTool,
  notFound,
  one,
  projectArg,
  projectOf,
  readStore,
  sendOps,
} from "../../engineering/ToolSupport.ts"
import type { ToolCaller, ToolOutput } from "../Tool.ts"

const optional = Schema.optionalKey

/** The live sticky notes, pinned files and open tasks of a project, for a workspace snapshot. */
const currentContext = (project: string) =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const all = { project, newestFirst: false, limit: listScanRecordsMax } as const
    const notes = yield* readStore(notesStore, (view) =>
      listRecords(view, { ...all, kind: stickyNoteKind, where: (record) => !isExpired(record, now) }),
    )
    const pins = yield* readStore(engineeringStore, (view) => listRecords(view, { ...all, kind: pinnedFileKind }))
    const tasks = yield* readStore(tasksStore, (view) =>
      listRecords(view, {
        ...all,
        kind: taskKind,
        where: (record) => openTaskStatuses.has(dataOf(taskKind, record).status),
      }),
    )
    return {
      notes: notes.records.map((record) => record.id),
      pinnedFiles: pins.records.map((record) =>
        compact({ path: dataOf(pinnedFileKind, record).path, note: dataOf(pinnedFileKind, record).note }),
      ),
      tasks: tasks.records.map((record) => record.id),
    }
  })

const loadWorkspace = (project: string, name: string, restorePins: boolean, caller: ToolCaller) =>
  Effect.gen(function* () {
    const workspace = yield* readStore(notesStore, (view) => getByUnique(view, project, workspaceKind, name))
    if (workspace === undefined)
      return yield* Effect.fail(notFound(`no context workspace "${name}" in project ${project}`))
    const saved = dataOf(workspaceKind, workspace)
    const now = yield* Clock.currentTimeMillis
    const notes = yield* readStore(notesStore, (view) =>
      saved.notes.map((id) => ({ id, record: getRecord(view, project, stickyNoteKind, id) })),
    )
    const tasks = yield* readStore(tasksStore, (view) =>
      saved.tasks.map((id) => ({ id, record: getRecord(view, project, taskKind, id) })),
    )
    const pinned = yield* readStore(engineeringStore, (view) =>
      saved.pinnedFiles.filter((file) => getByUnique(view, project, pinnedFileKind, file.path) === undefined),
    )
    if (restorePins && pinned.length > 0)
      yield* sendOps(
        engineeringStore,
        caller,
        "load_context_workspace",
        project,
        pinned.map((file) => ({ _tag: "Upsert", kind: pinnedFileKind.name, data: file })),
      )
    const liveNotes = notes.filter(({ record }) => record !== undefined && !isExpired(record, now))
    return {
      structured: {
        workspace: presentRecord(workspace),
        pinnedFiles: saved.pinnedFiles,
        notes: liveNotes.map(({ record }) => presentRecord(record!)),
        tasks: tasks.filter(({ record }) => record !== undefined).map(({ record }) => presentRecord(record!)),
        gone: {
          notes: notes.filter((note) => !liveNotes.includes(note)).map(({ id }) => id),
          tasks: tasks.filter(({ record }) => record === undefined).map(({ id }) => id),
        },
        repinned: restorePins ? pinned.map((file) => file.path) : [],
      },
    } satisfies ToolOutput
  })

/** The workspace tools. */
export const workspaceTools = [
  engineeringTool(
    "context",
    {
      name: "save_context_workspace",
      title: "Save Context Workspace",
      description:
        "Save a named working context: pinned files, sticky notes and open tasks. Omitted lists default to what is current (all pins, live notes, open tasks). Saving a name again replaces it.",
    },
    Schema.Struct({
      name: title("The workspace's name"),
      description: optional(text("What it is for")),
      pinned_files: optional(d(Files, "Default: every pinned file")),
      note_ids: optional(d(RecordIds, "Default: every live sticky note")),
      task_ids: optional(d(RecordIds, "Default: every open task")),
      project: projectArg,
    }),
    (args, caller) =>
      Effect.gen(function* () {
        const project = projectOf(args, caller)
        const current = yield* currentContext(project)
        const [workspace] = yield* sendOps(notesStore, caller, "save_context_workspace", project, [
          {
            _tag: "Upsert",
            kind: workspaceKind.name,
            data: compact({
              name: args.name,
              description: args.description,
              pinnedFiles: args.pinned_files?.map((path) => ({ path })) ?? current.pinnedFiles,
              notes: args.note_ids ?? current.notes,
              tasks: args.task_ids ?? current.tasks,
            }),
          },
        ])
        return one("workspace", workspace)
      }),
  ),
  engineeringTool(
    "context",
    {
      name: "load_context_workspace",
      title: "Load Context Workspace",
      description:
        "Restore a saved workspace: its pinned files (re-pinned), its notes and tasks as they are now. Without name, lists the saved workspaces.",
    },
    Schema.Struct({
      name: optional(title("Omit to list the saved workspaces")),
      restore_pins: optional(d(Schema.Boolean, "Re-pin its files (default true)")),
      project: projectArg,
    }),
    (args, caller) => {
      const project = projectOf(args, caller)
      if (args.name !== undefined) return loadWorkspace(project, args.name, args.restore_pins ?? true, caller)
      return readStore(notesStore, (view) =>
        listRecords(view, { project, kind: workspaceKind, newestFirst: false, limit: listScanRecordsMax }),
      ).pipe(
        Effect.map((result) => ({
          structured: {
            workspaces: result.records.map((record) => {
              const { name, description } = dataOf(workspaceKind, record)
              return compact({ name, description, updatedAt: new Date(record.updatedAt).toISOString() })
            }),
          },
        })),
      )
    },
  ),
  engineeringTool(
    "context",
    {
      name: "pin_file",
      title: "Pin File",
      description: "Pin a file as important context for this project (pinning again updates its note).",
      idempotent: true,
    },
    Schema.Struct({ path: filePath("The file"), note: optional(text("Why it matters")), project: projectArg }),
    (args, caller) =>
      sendOps(engineeringStore, caller, "pin_file", projectOf(args, caller), [
        { _tag: "Upsert", kind: pinnedFileKind.name, data: compact({ path: args.path, note: args.note }) },
      ]).pipe(Effect.map(([pin]) => one("pinned", pin))),
  ),
  engineeringTool(
    "context",
    { name: "unpin_file", title: "Unpin File", description: "Unpin a pinned file.", destructive: true },
    Schema.Struct({ path: filePath("The pinned file"), project: projectArg }),
    (args, caller) =>
      sendOps(engineeringStore, caller, "unpin_file", projectOf(args, caller), [
        { _tag: "Delete", kind: pinnedFileKind.name, unique: args.path },
      ]).pipe(Effect.map(([pin]) => one("unpinned", pin))),
  ),
]
