/**
 * The shell: header (project, connection, theme), the view navigation, the banners for an
 * unreachable daemon and a reconnect, the login screen, and keyboard shortcuts (1–8 switch views,
 * / searches, ? lists the keys). Views are chosen by the URL hash (`#/tasks`); the graph stays
 * mounted once opened, so its layout survives a look at another view.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { api, type StatsData } from "./api.ts"
import { useConnection, useNow, useResource } from "./hooks.ts"
import { Icon } from "./icons.tsx"
import { live } from "./live.ts"
import { ActivityView } from "./views/ActivityView.tsx"
import { ConversationsView } from "./views/ConversationsView.tsx"
import { GatesView } from "./views/GatesView.tsx"
import { GraphView } from "./views/GraphView.tsx"
import { NotesView } from "./views/NotesView.tsx"
import { SearchView } from "./views/SearchView.tsx"
import { StatsView } from "./views/StatsView.tsx"
import { TasksView } from "./views/TasksView.tsx"

const views = [
  { id: "graph", label: "Graph" },
  { id: "tasks", label: "Tasks" },
  { id: "notes", label: "Notes" },
  { id: "search", label: "Search" },
  { id: "activity", label: "Activity" },
  { id: "conversations", label: "Conversations" },
  { id: "gates", label: "Gates" },
  { id: "stats", label: "Stats" },
] as const
type ViewId = (typeof views)[number]["id"]

const routeOf = (hash: string): ViewId => {
  const id = hash.replace(/^#\/?/, "").split("?", 1)[0]
  return views.find((view) => view.id === id)?.id ?? "graph"
}

type Theme = "system" | "dark" | "light"
const themeKey = "mnemos.theme"
const projectKey = "mnemos.project"

const applyTheme = (theme: Theme) => {
  const dark = theme === "dark" || (theme === "system" && matchMedia("(prefers-color-scheme: dark)").matches)
  document.documentElement.dataset.theme = dark ? "dark" : "light"
}

const isTyping = (target: EventTarget | null) =>
  target instanceof HTMLElement &&
  (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName))

export const App = () => {
  const [route, setRoute] = useState<ViewId>(routeOf(location.hash))
  const [visited, setVisited] = useState<ReadonlySet<ViewId>>(new Set([routeOf(location.hash)]))
  const [project, setProject] = useState(localStorage.getItem(projectKey) ?? "default")
  const [theme, setTheme] = useState<Theme>((localStorage.getItem(themeKey) as Theme | null) ?? "system")
  const [help, setHelp] = useState(false)
  const connection = useConnection()
  const now = useNow(1000)
  const searchFocus = useRef(0)
  const [searchFocusTick, setSearchFocusTick] = useState(0)

  useEffect(() => live.start(), [])
  useEffect(() => {
    const onHash = () => {
      const next = routeOf(location.hash)
      setRoute(next)
      setVisited((previous) => (previous.has(next) ? previous : new Set([...previous, next])))
    }
    addEventListener("hashchange", onHash)
    return () => removeEventListener("hashchange", onHash)
  }, [])
  useEffect(() => {
    applyTheme(theme)
    localStorage.setItem(themeKey, theme)
    const media = matchMedia("(prefers-color-scheme: dark)")
    const onChange = () => applyTheme(theme)
    media.addEventListener("change", onChange)
    return () => media.removeEventListener("change", onChange)
  }, [theme])
  useEffect(() => localStorage.setItem(projectKey, project), [project])
  useEffect(() => {
    const label = views.find((view) => view.id === route)?.label ?? ""
    document.title = `${label} · mnemos`
  }, [route])

  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) return
      const index = Number(event.key) - 1
      if (Number.isInteger(index) && index >= 0 && index < views.length) {
        location.hash = `#/${views[index]!.id}`
        event.preventDefault()
      } else if (event.key === "/") {
        location.hash = "#/search"
        searchFocus.current++
        setSearchFocusTick(searchFocus.current)
        event.preventDefault()
      } else if (event.key === "?") {
        setHelp((open) => !open)
        event.preventDefault()
      } else if (event.key === "Escape") setHelp(false)
    }
    addEventListener("keydown", onKey)
    return () => removeEventListener("keydown", onKey)
  }, [])

  const stats = useResource(() => api<StatsData>("/api/stats"), [], { stores: ["graph"], pollMs: 15_000 })
  const [seenProjects, setSeenProjects] = useState<ReadonlySet<string>>(new Set())
  useEffect(
    () =>
      live.onEvents((events) => {
        const named = events.flatMap((event) =>
          event.project !== undefined && event.project !== "*" ? [event.project] : [],
        )
        setSeenProjects((previous) =>
          named.every((name) => previous.has(name)) ? previous : new Set([...previous, ...named]),
        )
      }),
    [],
  )
  const projects = [
    ...new Set([project, "default", ...seenProjects, ...(stats.data?.projects ?? []).map((entry) => entry.project)]),
  ].sort((a, b) => a.localeCompare(b))

  if (connection.status === "locked") return <Locked />

  const cycleTheme = () => setTheme(theme === "system" ? "dark" : theme === "dark" ? "light" : "system")
  return (
    <div class="shell">
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <a class="brand" href="#/graph" aria-label="mnemos Brain Monitor, home">
          <img src="/favicon.svg" alt="" width="26" height="26" />
          <span class="brand-name">mnemos</span>
          <span class="brand-sub">Brain Monitor</span>
        </a>
        <label class="project-picker">
          <span>Project</span>
          <select value={project} onChange={(event) => setProject(event.currentTarget.value)} aria-label="Project">
            {projects.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
        <div class="topbar-spacer" />
        <ConnectionPill status={connection.status} />
        <button
          type="button"
          class="icon-button"
          onClick={() => setHelp(true)}
          aria-label="Keyboard shortcuts"
          title="Keyboard shortcuts (?)"
        >
          ?
        </button>
        <button
          type="button"
          class="icon-button"
          onClick={cycleTheme}
          aria-label={`Theme: ${theme}. Change theme`}
          title={`Theme: ${theme}`}
        >
          {theme === "light" ? "☀" : theme === "dark" ? "☾" : "◐"}
        </button>
      </header>
      <nav class="sidebar" aria-label="Views">
        <ul>
          {views.map((view, index) => (
            <li key={view.id}>
              <a href={`#/${view.id}`} aria-current={route === view.id ? "page" : undefined} class="nav-link">
                <span class="nav-icon">
                  <Icon name={view.id} />
                </span>
                <span class="nav-label">{view.label}</span>
                <span class="nav-key" aria-hidden="true">
                  {index + 1}
                </span>
              </a>
            </li>
          ))}
        </ul>
        <p class="sidebar-foot">{stats.data?.version.version !== undefined ? `v${stats.data.version.version}` : ""}</p>
      </nav>
      <main id="main" class={`main view-${route}`} tabIndex={-1}>
        <Banners now={now} />
        {visited.has("graph") && <GraphView project={project} active={route === "graph"} />}
        {route === "tasks" && <TasksView project={project} />}
        {route === "notes" && <NotesView project={project} />}
        {route === "search" && <SearchView project={project} focusTick={searchFocusTick} />}
        {route === "activity" && <ActivityView project={project} />}
        {route === "conversations" && <ConversationsView project={project} />}
        {route === "gates" && <GatesView project={project} />}
        {route === "stats" && <StatsView project={project} />}
      </main>
      {help && <Help onClose={() => setHelp(false)} />}
    </div>
  )
}

const ConnectionPill = (props: { status: string }) => {
  const text =
    props.status === "live"
      ? "Live"
      : props.status === "offline"
        ? "Offline"
        : props.status === "connecting"
          ? "Connecting"
          : "Locked"
  return (
    <span class={`pill pill-${props.status}`} role="status" aria-live="polite" data-testid="connection">
      <span class="dot" aria-hidden="true" />
      {text}
    </span>
  )
}

/** "Daemon unreachable" while it is; "Reconnected" for a few seconds after. */
const Banners = (props: { now: number }) => {
  const connection = useConnection()
  if (connection.status === "offline") {
    const seconds = Math.max(0, Math.ceil(((connection.retryAt ?? props.now) - props.now) / 1000))
    return (
      <div class="banner banner-offline" role="alert" data-testid="offline-banner">
        <strong>The mnemos daemon is unreachable.</strong>
        <span>
          {seconds > 0 ? `Retrying in ${seconds} s.` : "Retrying…"} What you see may be out of date
          {connection.offlineSince !== undefined
            ? ` (since ${new Date(connection.offlineSince).toLocaleTimeString()})`
            : ""}
          .
        </span>
        <button type="button" class="button small" onClick={() => live.retryNow()}>
          Retry now
        </button>
      </div>
    )
  }
  if (
    connection.status === "live" &&
    connection.reconnectedAt !== undefined &&
    props.now - connection.reconnectedAt < 5000
  )
    return (
      <div class="banner banner-ok" role="status" data-testid="reconnected-banner">
        <strong>Reconnected.</strong> <span>Everything shown is up to date again.</span>
      </div>
    )
  return null
}

const Locked = () => {
  const expired = new URLSearchParams(location.search).get("login") === "expired"
  return (
    <main class="locked" id="main">
      <div class="locked-card">
        <img src="/favicon.svg" alt="" width="56" height="56" />
        <h1>Log in to mnemos</h1>
        {expired ? (
          <p class="warning">That login link was already used or has expired. Links work once, for an hour.</p>
        ) : (
          <p>This dashboard shows what your agents remember, so it needs a login.</p>
        )}
        <p>Run this on the machine where the daemon runs, then open the link it prints:</p>
        <pre>
          <code>mnemos dashboard --open</code>
        </pre>
        <p class="muted">
          The daemon also prints a link when it starts (<code>npm start</code>, <code>mnemos serve</code>).
        </p>
      </div>
    </main>
  )
}

const Help = (props: { onClose: () => void }) => {
  const ref = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    ref.current?.showModal()
  }, [])
  return (
    <dialog ref={ref} class="help" aria-labelledby="help-title" onClose={props.onClose}>
      <h2 id="help-title">Keyboard shortcuts</h2>
      <dl>
        {views.map((view, index) => (
          <div key={view.id}>
            <dt>
              <kbd>{index + 1}</kbd>
            </dt>
            <dd>{view.label}</dd>
          </div>
        ))}
        <div>
          <dt>
            <kbd>/</kbd>
          </dt>
          <dd>Search everything</dd>
        </div>
        <div>
          <dt>
            <kbd>Shift</kbd> + <kbd>←</kbd>/<kbd>→</kbd>
          </dt>
          <dd>Move the focused task to the previous / next column</dd>
        </div>
        <div>
          <dt>
            <kbd>?</kbd>
          </dt>
          <dd>This list</dd>
        </div>
      </dl>
      <form method="dialog">
        <button type="submit" class="button" onClick={props.onClose}>
          Close
        </button>
      </form>
    </dialog>
  )
}
