/**
 * Tasks: the project's kanban. Drag a card to another column (or focus it and press
 * Shift+←/→, or use its status menu) and the move is saved through the API at once; the board
 * shows the move immediately and puts the card back if the daemon refuses (say, because someone
 * changed the task meanwhile). Cards an agent just changed flash.
 */
import { useState } from "preact/hooks"
import { ApiFailure, api, type Task, type TaskStatus, taskStatuses, withProject } from "../api.ts"
import { Ago, Badge, Empty, Load, ViewHeader } from "../components.tsx"
import { shortAgent } from "../format.ts"
import { useNow, useRecentlyChanged, useResource } from "../hooks.ts"

const columnTitles: Record<TaskStatus, string> = { todo: "To do", doing: "Doing", blocked: "Blocked", done: "Done" }
const priorityRank = { urgent: 0, high: 1, medium: 2, low: 3 } as const

export const TasksView = (props: { project: string }) => {
  const { project } = props
  const tasks = useResource(() => api<{ tasks: ReadonlyArray<Task> }>(withProject("/api/tasks", project)), [project], {
    stores: ["tasks"],
    project,
  })
  const recent = useRecentlyChanged((event) => (event.store === "tasks" && event.record ? [event.record.id] : []))
  const [moves, setMoves] = useState<ReadonlyMap<string, TaskStatus>>(new Map())
  const [problem, setProblem] = useState<string | undefined>(undefined)
  const [dragging, setDragging] = useState<string | undefined>(undefined)
  const [over, setOver] = useState<TaskStatus | undefined>(undefined)
  const [announce, setAnnounce] = useState("")
  const now = useNow(10_000)

  const move = async (task: Task, status: TaskStatus) => {
    if (task.status === status && !moves.has(task.id)) return
    setMoves((previous) => new Map(previous).set(task.id, status))
    setProblem(undefined)
    setAnnounce(`Moved “${task.title}” to ${columnTitles[status]}.`)
    try {
      await api(withProject(`/api/tasks/${encodeURIComponent(task.id)}`, project), {
        method: "PATCH",
        body: JSON.stringify({ status, expected_revision: task.revision }),
      })
      tasks.refresh()
    } catch (error) {
      const message = error instanceof ApiFailure ? error.message : String(error)
      setProblem(`Could not move “${task.title}”: ${message}`)
      setAnnounce(`Could not move “${task.title}”.`)
      tasks.refresh()
    } finally {
      setTimeout(
        () =>
          setMoves((previous) => {
            const next = new Map(previous)
            next.delete(task.id)
            return next
          }),
        1500,
      )
    }
  }

  return (
    <section class="view tasks-view" aria-labelledby="tasks-title">
      <ViewHeader
        title="Tasks"
        subtitle={`Kanban of project “${project}” — drag cards between columns, or focus a card and press Shift+←/→.`}
      />
      <p class="visually-hidden" aria-live="polite">
        {announce}
      </p>
      <p id="card-keys-hint" hidden>
        Shift+Left or Shift+Right moves the task to the previous or next column.
      </p>
      {problem !== undefined && (
        <div class="failure" role="alert">
          {problem}
          <button type="button" class="button small" onClick={() => setProblem(undefined)}>
            Dismiss
          </button>
        </div>
      )}
      <Load resource={tasks} what="Tasks">
        {(data) => {
          const statusOf = (task: Task) => moves.get(task.id) ?? task.status
          if (data.tasks.length === 0)
            return (
              <Empty title="No tasks yet" icon="tasks">
                Agents add them with <code>add_task</code>; they land in “To do” here as soon as they are written.
              </Empty>
            )
          return (
            <div class="board" data-testid="board">
              {taskStatuses.map((status) => {
                const cards = data.tasks
                  .filter((task) => statusOf(task) === status)
                  .sort((a, b) =>
                    status === "done"
                      ? Date.parse(b.updatedAt) - Date.parse(a.updatedAt)
                      : priorityRank[a.priority] - priorityRank[b.priority] ||
                        Date.parse(a.createdAt) - Date.parse(b.createdAt),
                  )
                return (
                  <section
                    key={status}
                    class={`column column-${status} ${over === status ? "drop-target" : ""}`}
                    aria-labelledby={`column-${status}`}
                    data-status={status}
                    data-testid={`column-${status}`}
                    onDragOver={(event) => {
                      if (dragging === undefined) return
                      event.preventDefault()
                      if (event.dataTransfer) event.dataTransfer.dropEffect = "move"
                      setOver(status)
                    }}
                    onDragLeave={(event) => {
                      if (!(event.currentTarget as HTMLElement).contains(event.relatedTarget as Node | null))
                        setOver(undefined)
                    }}
                    onDrop={(event) => {
                      event.preventDefault()
                      setOver(undefined)
                      const id = event.dataTransfer?.getData("text/plain") || dragging
                      const task = data.tasks.find((candidate) => candidate.id === id)
                      if (task !== undefined) void move(task, status)
                    }}
                  >
                    <h2 id={`column-${status}`} class="column-title">
                      {columnTitles[status]} <span class="count">{cards.length}</span>
                    </h2>
                    <ul class="cards">
                      {cards.map((task) => (
                        <TaskCard
                          key={task.id}
                          task={task}
                          status={statusOf(task)}
                          now={now}
                          flash={recent.has(task.id)}
                          dragging={dragging === task.id}
                          onDragStart={() => setDragging(task.id)}
                          onDragEnd={() => {
                            setDragging(undefined)
                            setOver(undefined)
                          }}
                          onMove={(next) => void move(task, next)}
                        />
                      ))}
                      {cards.length === 0 && <li class="column-empty">Nothing here</li>}
                    </ul>
                  </section>
                )
              })}
            </div>
          )
        }}
      </Load>
    </section>
  )
}

const TaskCard = (props: {
  task: Task
  status: TaskStatus
  now: number
  flash: boolean
  dragging: boolean
  onDragStart: () => void
  onDragEnd: () => void
  onMove: (status: TaskStatus) => void
}) => {
  const { task } = props
  const index = taskStatuses.indexOf(props.status)
  return (
    <li
      class={`card priority-${task.priority} ${props.flash ? "flash" : ""} ${props.dragging ? "dragging" : ""}`}
      draggable
      data-task-id={task.id}
      data-testid="task-card"
      onDragStart={(event) => {
        event.dataTransfer?.setData("text/plain", task.id)
        if (event.dataTransfer) event.dataTransfer.effectAllowed = "move"
        props.onDragStart()
      }}
      onDragEnd={props.onDragEnd}
    >
      <div class="card-top">
        <button
          type="button"
          class="card-handle"
          aria-label={`Move “${task.title}” (${columnTitles[props.status]})`}
          aria-describedby="card-keys-hint"
          title="Drag, or press Shift+←/→"
          onKeyDown={(event) => {
            if (!event.shiftKey || (event.key !== "ArrowLeft" && event.key !== "ArrowRight")) return
            const next = taskStatuses[index + (event.key === "ArrowLeft" ? -1 : 1)]
            if (next !== undefined) props.onMove(next)
            event.preventDefault()
          }}
        >
          ⠿
        </button>
        <span class={`priority priority-${task.priority}`} title={`${task.priority} priority`}>
          {task.priority}
        </span>
        <label class="status-select">
          <span class="visually-hidden">Status of {task.title}</span>
          <select value={props.status} onChange={(event) => props.onMove(event.currentTarget.value as TaskStatus)}>
            {taskStatuses.map((status) => (
              <option key={status} value={status}>
                {columnTitles[status]}
              </option>
            ))}
          </select>
        </label>
      </div>
      <p class="card-title">{task.title}</p>
      {task.description !== undefined && <p class="card-description">{task.description}</p>}
      {(task.tags?.length ?? 0) + (task.links?.length ?? 0) > 0 && (
        <p class="card-tags">
          {task.tags?.map((tag) => (
            <Badge key={`t${tag}`}>#{tag}</Badge>
          ))}
          {task.links?.map((link) => (
            <Badge key={`l${link}`} tone="link">
              ◉ {link}
            </Badge>
          ))}
        </p>
      )}
      <p class="card-foot">
        {task.assignee !== undefined && <span class="assignee">@{task.assignee}</span>}
        {task.due !== undefined && <span class="due">due {task.due.slice(0, 10)}</span>}
        <span class="who" title={task.updatedBy}>
          {shortAgent(task.updatedBy)} · <Ago time={task.updatedAt} now={props.now} />
        </span>
      </p>
    </li>
  )
}
