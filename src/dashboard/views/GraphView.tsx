/**
 * Graph: the project's entities and relations on WebGL, laid out by physics. Search a name to
 * fly to it; click a node for its observations, relations and history; the legend filters by
 * entity type. Live graph events are applied in place; a change too big to apply reloads.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { api, type EntityDetails, type GraphData, withProject } from "../api.ts"
import { Ago, Badge, Empty, Failure, Loading } from "../components.tsx"
import { colorOf, formatCount } from "../format.ts"
import { useNow, useResource } from "../hooks.ts"
import { live } from "../live.ts"
import { GraphScene } from "./GraphScene.ts"

/** Entity types listed in the legend before "more". */
const legendTypesShown = 12

export const GraphView = (props: { project: string; active: boolean }) => {
  const { project, active } = props
  const container = useRef<HTMLDivElement>(null)
  const scene = useRef<GraphScene | undefined>(undefined)
  const [selected, setSelected] = useState<string | undefined>(undefined)
  const [version, setVersion] = useState(0)
  const [hiddenTypes, setHiddenTypes] = useState<ReadonlySet<string>>(new Set())
  const [state, setState] = useState<{ loading: boolean; error?: unknown; truncated: boolean }>({
    loading: true,
    truncated: false,
  })

  useEffect(() => {
    const created = new GraphScene(container.current!, {
      onSelect: (node) => setSelected(node),
      onChange: () => setVersion((value) => value + 1),
    })
    scene.current = created
    return () => created.kill()
  }, [])

  useEffect(() => {
    let generation = 0
    let startedAt = 0
    let timer: ReturnType<typeof setTimeout> | undefined
    const load = () => {
      const mine = ++generation
      startedAt = Date.now()
      setState((previous) => ({ ...previous, loading: true }))
      api<GraphData>(withProject("/api/graph", project)).then(
        (data) => {
          if (mine !== generation) return
          scene.current?.load(data)
          setState({ loading: false, truncated: data.truncated })
        },
        (error: unknown) => mine === generation && setState((previous) => ({ ...previous, loading: false, error })),
      )
    }
    const reloadSoon = () => {
      clearTimeout(timer)
      timer = setTimeout(load, 200)
    }
    scene.current?.load({ project, truncated: false, nodes: [], edges: [] })
    setSelected(undefined)
    load()
    const offEvents = live.onEvents((events) => {
      const mine = events.filter((event) => event.store === "graph" && event.project === project)
      if (mine.length > 0 && !scene.current?.apply(mine)) reloadSoon()
    })
    // Re-read after a (re)connect or a resync, unless a read started after it anyway.
    const offResync = live.onResync((at) => {
      if (startedAt < at) reloadSoon()
    })
    return () => {
      generation++
      clearTimeout(timer)
      offEvents()
      offResync()
    }
  }, [project])

  useEffect(() => {
    if (active) requestAnimationFrame(() => scene.current?.resizeView())
  }, [active])
  useEffect(() => scene.current?.select(selected), [selected])
  useEffect(() => scene.current?.setHiddenTypes(hiddenTypes), [hiddenTypes])

  const graph = scene.current?.graph
  const typeColor = (type: string) => scene.current?.colorOf(type) ?? colorOf(type)
  const focusNode = (node: string) => {
    setSelected(node)
    scene.current?.focus(node)
  }
  const types = version >= 0 && scene.current !== undefined ? scene.current.types() : []
  const order = graph?.order ?? 0
  const size = graph?.size ?? 0
  const toggleType = (type: string) =>
    setHiddenTypes((previous) => {
      const next = new Set(previous)
      if (next.has(type)) next.delete(type)
      else next.add(type)
      return next
    })

  return (
    <section class="graph-view" hidden={!active} aria-label="Knowledge graph">
      <div class="graph-toolbar">
        <h1 class="visually-hidden">Graph</h1>
        <NodeSearch scene={scene.current} onPick={focusNode} />
        <div class="graph-counts" aria-live="polite">
          <strong>{formatCount(order)}</strong> entities · <strong>{formatCount(size)}</strong> relations
          {state.truncated && <Badge tone="warn">first {formatCount(order)} shown</Badge>}
        </div>
        <fieldset class="toolbar-group">
          <legend class="visually-hidden">Layout and zoom</legend>
          <button
            type="button"
            class="button small"
            aria-pressed={scene.current?.layoutRunning ?? false}
            onClick={() => (scene.current?.layoutRunning ? scene.current.stopLayout() : scene.current?.runLayout(8000))}
          >
            {scene.current?.layoutRunning ? "Pause layout" : "Run layout"}
          </button>
          <button
            type="button"
            class="icon-button"
            aria-label="Zoom in"
            title="Zoom in"
            onClick={() => scene.current?.zoomIn()}
          >
            +
          </button>
          <button
            type="button"
            class="icon-button"
            aria-label="Zoom out"
            title="Zoom out"
            onClick={() => scene.current?.zoomOut()}
          >
            −
          </button>
          <button
            type="button"
            class="icon-button"
            aria-label="Fit the whole graph"
            title="Fit"
            onClick={() => scene.current?.fit()}
          >
            ⤢
          </button>
        </fieldset>
      </div>
      <div class="graph-body">
        <div class="graph-stage">
          <div
            ref={container}
            class="graph-canvas"
            role="img"
            aria-label={`Knowledge graph of project ${project}: ${order} entities and ${size} relations. Use the search box to find an entity.`}
            data-testid="graph-canvas"
          />
          {state.loading && order === 0 && <Loading label="Loading the graph…" />}
          {!state.loading && state.error === undefined && order === 0 && (
            <div class="graph-empty">
              <Empty title={`No entities in “${project}” yet`} icon="graph">
                Agents add them with <code>create_entities</code>; they appear here the moment they are written.
              </Empty>
            </div>
          )}
          {state.error !== undefined && order === 0 && (
            <div class="graph-empty">
              <Failure error={state.error as never} what="The graph" />
            </div>
          )}
          {types.length > 0 && (
            <Legend
              types={types}
              hidden={hiddenTypes}
              colorOf={typeColor}
              onToggle={toggleType}
              onShowAll={() => setHiddenTypes(new Set())}
            />
          )}
        </div>
        {selected !== undefined && (
          <EntityPanel
            project={project}
            name={selected}
            colorOf={typeColor}
            onClose={() => setSelected(undefined)}
            onPick={focusNode}
          />
        )}
      </div>
    </section>
  )
}

/** Search-to-focus: a combobox over the graph's names. */
const NodeSearch = (props: { scene: GraphScene | undefined; onPick: (node: string) => void }) => {
  const [query, setQuery] = useState("")
  const [active, setActive] = useState(0)
  const [open, setOpen] = useState(false)
  const matches = open && props.scene !== undefined ? props.scene.find(query, 8) : []
  const pick = (node: string) => {
    props.onPick(node)
    setQuery(node)
    setOpen(false)
  }
  return (
    <div class="node-search">
      <label for="node-search-input" class="visually-hidden">
        Find an entity
      </label>
      <input
        id="node-search-input"
        type="search"
        // biome-ignore lint/a11y/noRedundantRoles: a text box driving its own listbox is an ARIA 1.2 combobox
        role="combobox"
        list={undefined}
        aria-expanded={matches.length > 0}
        aria-controls="node-search-list"
        aria-autocomplete="list"
        aria-activedescendant={matches.length > 0 ? `node-option-${active}` : undefined}
        placeholder="Find an entity…"
        autocomplete="off"
        value={query}
        onInput={(event) => {
          setQuery(event.currentTarget.value)
          setActive(0)
          setOpen(true)
        }}
        onKeyDown={(event) => {
          if (event.key === "ArrowDown") setActive((index) => Math.min(matches.length - 1, index + 1))
          else if (event.key === "ArrowUp") setActive((index) => Math.max(0, index - 1))
          else if (event.key === "Enter" && matches[active] !== undefined) pick(matches[active]!)
          else if (event.key === "Escape") setOpen(false)
          else return
          event.preventDefault()
        }}
        onBlur={() => setTimeout(() => setOpen(false), 150)}
      />
      {matches.length > 0 && (
        <div id="node-search-list" role="listbox" class="node-search-list">
          {matches.map((node, index) => {
            const type = props.scene!.graph.getNodeAttribute(node, "entityType")
            return (
              <div
                key={node}
                id={`node-option-${index}`}
                role="option"
                tabIndex={-1}
                aria-selected={index === active}
                class={index === active ? "active" : ""}
                onMouseDown={(event) => {
                  event.preventDefault()
                  pick(node)
                }}
              >
                <span class="dot" style={{ background: props.scene!.colorOf(type) }} aria-hidden="true" />
                <span class="option-name">{node}</span>
                <span class="option-type">{type}</span>
              </div>
            )
          })}
        </div>
      )}
    </div>
  )
}

const Legend = (props: {
  types: ReadonlyArray<[string, number]>
  hidden: ReadonlySet<string>
  colorOf: (type: string) => string
  onToggle: (type: string) => void
  onShowAll: () => void
}) => {
  const [expanded, setExpanded] = useState(false)
  const shown = expanded ? props.types : props.types.slice(0, legendTypesShown)
  return (
    <fieldset class="legend">
      <legend class="visually-hidden">Entity types (toggle to filter)</legend>
      {shown.map(([type, count]) => (
        <button
          key={type}
          type="button"
          class="legend-item"
          aria-pressed={!props.hidden.has(type)}
          title={props.hidden.has(type) ? `Show ${type}` : `Hide ${type}`}
          onClick={() => props.onToggle(type)}
        >
          <span class="dot" style={{ background: props.colorOf(type) }} aria-hidden="true" />
          <span class="legend-name">{type}</span>
          <span class="legend-count">{formatCount(count)}</span>
        </button>
      ))}
      {props.types.length > legendTypesShown && (
        <button type="button" class="legend-item more" onClick={() => setExpanded(!expanded)} aria-expanded={expanded}>
          {expanded ? "fewer" : `+${props.types.length - legendTypesShown} more`}
        </button>
      )}
      {props.hidden.size > 0 && (
        <button type="button" class="legend-item more" onClick={props.onShowAll}>
          show all
        </button>
      )}
    </fieldset>
  )
}

/** One entity: observations, relations and history. */
const EntityPanel = (props: {
  project: string
  name: string
  colorOf: (type: string) => string
  onClose: () => void
  onPick: (node: string) => void
}) => {
  const now = useNow(5000)
  const details = useResource(
    () => api<EntityDetails>(withProject("/api/entity", props.project, { name: props.name })),
    [props.project, props.name],
    { stores: ["graph"], project: props.project },
  )
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [props.name])
  const entity = details.data?.entities[0]
  const outgoing = details.data?.relations.filter((relation) => relation.from === props.name) ?? []
  const incoming = details.data?.relations.filter((relation) => relation.to === props.name) ?? []
  const history = entity
    ? [
        { at: entity.createdAt, text: `created as ${entity.entityType}` },
        ...entity.observations.map((observation) => ({
          at: observation.createdAt,
          text: `observed: ${observation.text}`,
        })),
        ...details.data!.relations.map((relation) => ({
          at: relation.createdAt,
          text:
            relation.from === props.name
              ? `→ ${relation.relationType} ${relation.to}`
              : `← ${relation.relationType} from ${relation.from}`,
        })),
      ].sort((a, b) => Date.parse(b.at) - Date.parse(a.at))
    : []
  return (
    <aside class="entity-panel" aria-labelledby="entity-title" data-testid="entity-panel">
      <div class="panel-head">
        <h2 id="entity-title" ref={heading} tabIndex={-1}>
          {props.name}
        </h2>
        <button type="button" class="icon-button" aria-label="Close details" onClick={props.onClose}>
          ×
        </button>
      </div>
      {details.data === undefined && details.error === undefined && <Loading />}
      {details.error !== undefined && details.data === undefined && (
        <Failure error={details.error} what="Entity details" />
      )}
      {details.data !== undefined && entity === undefined && <p class="muted">This entity no longer exists.</p>}
      {entity !== undefined && (
        <>
          <p class="entity-meta">
            <Badge>
              <span class="dot" style={{ background: props.colorOf(entity.entityType) }} aria-hidden="true" />{" "}
              {entity.entityType}
            </Badge>
            <span>
              created <Ago time={entity.createdAt} now={now} /> · changed <Ago time={entity.updatedAt} now={now} />
            </span>
          </p>
          <h3>Observations ({entity.observations.length})</h3>
          {entity.observations.length === 0 ? (
            <p class="muted">None yet.</p>
          ) : (
            <ul class="observations">
              {entity.observations.map((observation, index) => (
                <li key={index}>
                  <p>{observation.text}</p>
                  <Ago time={observation.createdAt} now={now} />
                </li>
              ))}
            </ul>
          )}
          <h3>Relations ({outgoing.length + incoming.length})</h3>
          {outgoing.length + incoming.length === 0 && <p class="muted">None yet.</p>}
          <ul class="relations">
            {outgoing.map((relation) => (
              <li key={`o${relation.relationType}${relation.to}`}>
                <span class="rel-type">{relation.relationType}</span> →{" "}
                <button type="button" class="link" onClick={() => props.onPick(relation.to)}>
                  {relation.to}
                </button>
              </li>
            ))}
            {incoming.map((relation) => (
              <li key={`i${relation.relationType}${relation.from}`}>
                <button type="button" class="link" onClick={() => props.onPick(relation.from)}>
                  {relation.from}
                </button>{" "}
                → <span class="rel-type">{relation.relationType}</span>
              </li>
            ))}
          </ul>
          <h3>History</h3>
          <ol class="timeline">
            {history.map((item, index) => (
              <li key={index}>
                <Ago time={item.at} now={now} />
                <span>{item.text}</span>
              </li>
            ))}
          </ol>
        </>
      )}
    </aside>
  )
}
