/**
 * The `tasks` store: a kanban of project tasks (todo → doing → blocked → done) with priority,
 * assignee, due date and links to knowledge-graph entities. `completedAt` is kept by the store:
 * set when a task becomes done, removed when it leaves done.
 */
import { Schema } from "effect"
import { EntityName } from "../graph/Model.ts"
import { IsoDate, ListOf, NonEmptyText, Tags, Text, Title } from "./Fields.ts"
import { defineKind, makeRecordStore } from "./RecordStore.ts"

/** Kanban columns, in board order. */
export const taskStatuses = ["todo", "doing", "blocked", "done"] as const
export const TaskStatus = Schema.Literals(taskStatuses)
export type TaskStatus = typeof TaskStatus.Type

/** Priorities, lowest first. */
export const taskPriorities = ["low", "medium", "high", "urgent"] as const
export const TaskPriority = Schema.Literals(taskPriorities)

/** The statuses of work not yet finished. */
export const openTaskStatuses: ReadonlySet<TaskStatus> = new Set(["todo", "doing", "blocked"])

export const TaskData = Schema.Struct({
  title: Title,
  description: Schema.optionalKey(Text),
  status: TaskStatus,
  priority: TaskPriority,
  assignee: Schema.optionalKey(Title),
  due: Schema.optionalKey(IsoDate),
  links: Schema.optionalKey(ListOf(EntityName)),
  tags: Schema.optionalKey(Tags),
  completedAt: Schema.optionalKey(Schema.Number),
  completionNote: Schema.optionalKey(NonEmptyText),
})
export type TaskData = typeof TaskData.Type

export const taskKind = defineKind<TaskData>({
  name: "task",
  data: TaskData,
  title: (task) => task.title,
  namedBy: (task) => task.title,
  text: (task) => [task.title, task.description, task.assignee, ...(task.tags ?? []), ...(task.links ?? [])],
  normalize: (task, previous, now) => {
    if (task.status !== "done") {
      const { completedAt: _, ...rest } = task
      return rest
    }
    return { ...task, completedAt: previous?.status === "done" ? (previous.completedAt ?? now) : now }
  },
})

export const tasksStore = makeRecordStore("tasks", [taskKind])
