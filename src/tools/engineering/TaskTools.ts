/**
 * The task tools (toolset `tasks`): add_task, update_task, complete_task, list_tasks — the
 * project's kanban, on the `tasks` store.
 */
import { Effect, Schema } from "effect"
import { isoDate, ListOf, nonEmptyText, text, title } from "../../engineering/Fields.ts"
import { listLimitDefault, listRecords } from "../../engineering/RecordQueries.ts"
import { dataOf } from "../../engineering/RecordStore.ts"
import { openTaskStatuses, TaskPriority, TaskStatus, taskKind, tasksStore } from "../../engineering/Tasks.ts"
import {
  compact,
  cursorArg,
  described as d,
  engineeringTool,
  expectedRevisionArg,
  idArg,
  invalidArgs,
  limitArg,
  linkName,
  one,
  page,
  projectArg,
  projectOf,
  queryArg,
  readStore,
  sendOps,
  tagsArg,
} from "../../engineering/ToolSupport.ts"

const optional = Schema.optionalKey

const TaskFields = {
  title: optional(title("What to do, one line")),
  description: optional(text("Details")),
  status: optional(d(TaskStatus, "Kanban column")),
  priority: optional(d(TaskPriority, "Default medium")),
  assignee: optional(title("Agent or person")),
  due: optional(isoDate("Due date, ISO 8601")),
  links: optional(d(ListOf(linkName("An entity name")), "Knowledge-graph entity names")),
  tags: optional(tagsArg),
}
const clearableTaskFields = ["description", "assignee", "due"] as const

/** The task tools. */
export const taskTools = [
  engineeringTool(
    "tasks",
    {
      name: "add_task",
      title: "Add Task",
      description:
        "Add a task to the project's kanban (todo/doing/blocked/done). Use for work to do later or by someone else; link graph entities it concerns.",
    },
    Schema.Struct({ ...TaskFields, title: title("What to do, one line"), project: projectArg }),
    (args, caller) =>
      sendOps(tasksStore, caller, "add_task", projectOf(args, caller), [
        {
          _tag: "Create",
          kind: taskKind.name,
          data: compact({
            title: args.title,
            description: args.description,
            status: args.status ?? "todo",
            priority: args.priority ?? "medium",
            assignee: args.assignee,
            due: args.due,
            links: args.links,
            tags: args.tags,
          }),
        },
      ]).pipe(Effect.map(([task]) => one("task", task))),
  ),
  engineeringTool(
    "tasks",
    {
      name: "update_task",
      title: "Update Task",
      description:
        "Change a task's fields or move it between columns. Only the fields given change. Pass expected_revision to avoid overwriting someone else's change.",
    },
    Schema.Struct({
      id: idArg,
      expected_revision: expectedRevisionArg,
      ...TaskFields,
      clear: optional(d(Schema.Array(Schema.Literals(clearableTaskFields)), "Fields to empty")),
      project: projectArg,
    }),
    (args, caller) => {
      const { id, expected_revision, project: _, clear, ...fields } = args
      if (Object.values(fields).every((value) => value === undefined) && (clear ?? []).length === 0)
        return Effect.fail(invalidArgs("nothing to update: give at least one field"))
      const patch = { ...fields, ...Object.fromEntries((clear ?? []).map((field) => [field, null])) }
      return sendOps(tasksStore, caller, "update_task", projectOf(args, caller), [
        { _tag: "Update", kind: taskKind.name, id, patch, ...compact({ expectedRevision: expected_revision }) },
      ]).pipe(Effect.map(([task]) => one("task", task)))
    },
  ),
  engineeringTool(
    "tasks",
    { name: "complete_task", title: "Complete Task", description: "Mark a task done, with an optional note." },
    Schema.Struct({
      id: idArg,
      note: optional(nonEmptyText("What was done")),
      expected_revision: expectedRevisionArg,
      project: projectArg,
    }),
    (args, caller) =>
      sendOps(tasksStore, caller, "complete_task", projectOf(args, caller), [
        {
          _tag: "Update",
          kind: taskKind.name,
          id: args.id,
          patch: compact({ status: "done", completionNote: args.note }),
          ...compact({ expectedRevision: args.expected_revision }),
        },
      ]).pipe(Effect.map(([task]) => one("task", task))),
  ),
  engineeringTool(
    "tasks",
    {
      name: "list_tasks",
      title: "List Tasks",
      description:
        "List the project's tasks, oldest first, filtered by status, assignee, priority, linked entity or text.",
      readOnly: true,
    },
    Schema.Struct({
      status: optional(d(TaskStatus, "Only this column")),
      open_only: optional(d(Schema.Boolean, "Only todo, doing and blocked")),
      assignee: optional(title("Only this assignee")),
      priority: optional(d(TaskPriority, "Only this priority")),
      link: optional(linkName("Only tasks linked to this entity")),
      query: queryArg,
      limit: limitArg,
      cursor: cursorArg,
      project: projectArg,
    }),
    (args, caller) =>
      readStore(tasksStore, (view) =>
        listRecords(view, {
          project: projectOf(args, caller),
          kind: taskKind,
          newestFirst: false,
          limit: args.limit ?? listLimitDefault,
          cursor: args.cursor,
          query: args.query,
          where: (record) => {
            const task = dataOf(taskKind, record)
            return (
              (args.status === undefined || task.status === args.status) &&
              (args.open_only !== true || openTaskStatuses.has(task.status)) &&
              (args.assignee === undefined || task.assignee === args.assignee) &&
              (args.priority === undefined || task.priority === args.priority) &&
              (args.link === undefined || (task.links ?? []).includes(args.link))
            )
          },
        }),
      ).pipe(Effect.map((result) => page(result.records, result.nextCursor, "tasks"))),
  ),
]
