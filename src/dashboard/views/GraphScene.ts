/**
 * The knowledge graph on WebGL: a graphology graph drawn by sigma, laid out by ForceAtlas2 in a
 * web worker (so 10k nodes stay smooth: the page thread only draws).
 *
 * Owns the graph, the renderer and the layout. Live changes are applied in place (`apply`):
 * new entities appear next to a neighbour (or at a spot derived from their name, so a reload
 * puts them in the same place), flash for a moment, and a short layout run settles them without
 * shaking the rest. Node attributes avoid sigma's reserved `type` (which picks a WebGL program):
 * the entity type is `entityType`.
 */
import { MultiDirectedGraph } from "graphology"
import forceAtlas2 from "graphology-layout-forceatlas2"
import FA2Layout from "graphology-layout-forceatlas2/worker"
import Sigma from "sigma"
import type { NodeDisplayData, PartialButFor } from "sigma/types"
import type { GraphData } from "../api.ts"
import { typePalette } from "../format.ts"
import type { LiveEvent } from "../live.ts"

/** How long a changed node stays highlighted. */
export const flashMs = 4000
/** Longest initial layout run. */
export const layoutMsMax = 20_000
/** Up to this many nodes, every node's name is drawn (beyond, sigma's label grid picks a readable few). */
export const labelAllNodesMax = 40

interface NodeAttributes {
  x: number
  y: number
  size: number
  color: string
  label: string
  entityType: string
  observations: number
}
interface EdgeAttributes {
  relationType: string
  size: number
}

const edgeKey = (from: string, type: string, to: string) => `${from}\u0000${type}\u0000${to}`

/** A stable pseudo-random number in [0, 1) from a string (positions survive reloads). */
const unitHash = (text: string, salt: number) => {
  let hash = 2166136261 ^ salt
  for (let index = 0; index < text.length; index++) hash = Math.imul(hash ^ text.charCodeAt(index), 16777619)
  return ((hash >>> 0) % 100_000) / 100_000
}

const themes = {
  dark: { label: "#d5dbe5", faded: "#262c38", edge: "#3a4253", hoverBg: "#1b2130", hoverText: "#f3f5f9" },
  light: { label: "#1f2430", faded: "#e1e4ea", edge: "#c3c9d4", hoverBg: "#ffffff", hoverText: "#111827" },
}
/** The colours of the page's current theme (read per frame: no allocation). */
const themeColors = () => (document.documentElement.dataset.theme === "light" ? themes.light : themes.dark)

/** Sigma's hover label, in the page's theme. */
const drawHover = (
  context: CanvasRenderingContext2D,
  data: PartialButFor<NodeDisplayData, "x" | "y" | "size" | "label" | "color">,
) => {
  if (!data.label) return
  const colors = themeColors()
  const size = 13
  context.font = `600 ${size}px Inter, system-ui, sans-serif`
  const width = context.measureText(data.label).width
  const x = data.x + data.size + 4
  const y = data.y - size / 2 - 5
  context.fillStyle = colors.hoverBg
  context.shadowColor = "rgba(0,0,0,0.35)"
  context.shadowBlur = 10
  context.beginPath()
  context.roundRect(x - 6, y, width + 12, size + 10, 6)
  context.fill()
  context.shadowBlur = 0
  context.fillStyle = colors.hoverText
  context.fillText(data.label, x, y + size + 2)
  context.beginPath()
  context.arc(data.x, data.y, data.size + 3, 0, Math.PI * 2)
  context.strokeStyle = data.color
  context.lineWidth = 2
  context.stroke()
}

export interface SceneCallbacks {
  readonly onSelect: (node: string | undefined) => void
  readonly onChange: () => void
}

/** The graph view's drawing, layout and live changes; the Preact view drives it. */
export class GraphScene {
  readonly graph = new MultiDirectedGraph<NodeAttributes, EdgeAttributes>()
  private readonly renderer: Sigma<NodeAttributes, EdgeAttributes>
  private layout: FA2Layout<NodeAttributes, EdgeAttributes> | undefined
  private layoutTimer: ReturnType<typeof setTimeout> | undefined
  /** When the current layout run ends (ms since the epoch). */
  private layoutUntil = 0
  private hovered: string | undefined
  private selected: string | undefined
  private neighbours = new Set<string>()
  private hiddenTypes: ReadonlySet<string> = new Set()
  private readonly flashing = new Map<string, number>()
  private flashTimer: ReturnType<typeof setTimeout> | undefined
  private readonly themeObserver: MutationObserver
  /** Colour per entity type: the most common types get the most distinct colours, new ones the next free. */
  private readonly typeColors = new Map<string, string>()

  constructor(
    container: HTMLElement,
    private readonly callbacks: SceneCallbacks,
  ) {
    const colors = themeColors()
    this.renderer = new Sigma(this.graph, container, {
      allowInvalidContainer: true,
      defaultEdgeType: "arrow",
      renderEdgeLabels: false,
      labelFont: "Inter, system-ui, sans-serif",
      labelSize: 12,
      labelWeight: "500",
      labelColor: { color: colors.label },
      labelDensity: 0.6,
      labelGridCellSize: 90,
      labelRenderedSizeThreshold: 7,
      zIndex: true,
      hideEdgesOnMove: false,
      minCameraRatio: 0.02,
      maxCameraRatio: 8,
      defaultDrawNodeHover: drawHover,
      nodeReducer: (node, data) => this.reduceNode(node, data),
      edgeReducer: (edge, data) => this.reduceEdge(edge, data),
    })
    // How many names are drawn, for tests and assistive checks (the canvas itself has no text).
    this.renderer.on("afterRender", () => {
      container.dataset.labels = String(this.renderer.getNodeDisplayedLabels().size)
    })
    this.renderer.on("clickNode", ({ node }) => this.callbacks.onSelect(node))
    this.renderer.on("clickStage", () => this.callbacks.onSelect(undefined))
    this.renderer.on("enterNode", ({ node }) => {
      this.hovered = node
      container.style.cursor = "pointer"
      this.renderer.refresh({ skipIndexation: true })
    })
    this.renderer.on("leaveNode", () => {
      this.hovered = undefined
      container.style.cursor = ""
      this.renderer.refresh({ skipIndexation: true })
    })
    this.themeObserver = new MutationObserver(() => {
      this.renderer.setSetting("labelColor", { color: themeColors().label })
    })
    this.themeObserver.observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] })
  }

  // ---- drawing -------------------------------------------------------------------------------

  private reduceNode(node: string, data: NodeAttributes): Partial<NodeDisplayData> {
    if (this.hiddenTypes.has(data.entityType)) return { ...data, hidden: true }
    const focus = this.hovered ?? this.selected
    const display: Partial<NodeDisplayData> = { ...data }
    if (this.graph.order <= labelAllNodesMax) display.forceLabel = true
    if (this.flashing.has(node)) {
      display.highlighted = true
      display.size = data.size * 1.5
      display.zIndex = 2
      display.forceLabel = true
    }
    if (focus !== undefined) {
      const near =
        node === focus || (focus === this.selected ? this.neighbours.has(node) : this.graph.areNeighbors(focus, node))
      if (near) {
        display.zIndex = 1
        display.forceLabel = true
        if (node === focus) display.highlighted = true
      } else {
        display.color = themeColors().faded
        display.label = ""
        display.zIndex = 0
      }
    }
    return display
  }

  private reduceEdge(edge: string, data: EdgeAttributes) {
    const focus = this.hovered ?? this.selected
    // The common case, once per edge per frame: nothing filtered, nothing focused.
    if (focus === undefined && this.hiddenTypes.size === 0) return { ...data, color: themeColors().edge }
    const [source, target] = this.graph.extremities(edge)
    const sourceType = this.graph.getNodeAttribute(source, "entityType")
    const targetType = this.graph.getNodeAttribute(target, "entityType")
    if (this.hiddenTypes.has(sourceType) || this.hiddenTypes.has(targetType)) return { ...data, hidden: true }
    if (focus !== undefined && source !== focus && target !== focus) return { ...data, hidden: true }
    if (focus !== undefined) return { ...data, color: this.graph.getNodeAttribute(focus, "color"), size: 1.5 }
    return { ...data, color: themeColors().edge }
  }

  /** The colour of an entity type. */
  colorOf(type: string): string {
    let color = this.typeColors.get(type)
    if (color === undefined) {
      color = typePalette[this.typeColors.size % typePalette.length]!
      this.typeColors.set(type, color)
    }
    return color
  }

  /** Gives the most common types the first colours (only before any colour is handed out). */
  private assignColors(types: ReadonlyArray<string>) {
    if (this.typeColors.size > 0) return
    const counts = new Map<string, number>()
    for (const type of types) counts.set(type, (counts.get(type) ?? 0) + 1)
    for (const [type] of [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) this.colorOf(type)
  }

  /** Node radius: grows with the degree, shrinks as the graph grows (10k nodes must not become one blob). */
  private sizeOf(node: string) {
    const order = this.graph.order
    const scale = order <= 500 ? 1 : Math.max(0.45, 1 - 0.18 * Math.log2(order / 500))
    return Math.min(22, scale * (3 + 1.7 * Math.sqrt(this.graph.degree(node))))
  }

  private resize(nodes: Iterable<string>) {
    for (const node of nodes) if (this.graph.hasNode(node)) this.graph.setNodeAttribute(node, "size", this.sizeOf(node))
  }

  private spotFor(name: string, near?: string): { x: number; y: number } {
    if (near !== undefined && this.graph.hasNode(near)) {
      const at = this.graph.getNodeAttributes(near)
      const angle = unitHash(name, 3) * Math.PI * 2
      return { x: at.x + Math.cos(angle) * 2, y: at.y + Math.sin(angle) * 2 }
    }
    const radius = 10 * Math.sqrt(Math.max(1, this.graph.order)) * Math.sqrt(unitHash(name, 1))
    const angle = unitHash(name, 2) * Math.PI * 2
    return { x: Math.cos(angle) * radius, y: Math.sin(angle) * radius }
  }

  private addNode(name: string, type: string, observations: number, near?: string) {
    if (this.graph.hasNode(name)) {
      this.graph.mergeNodeAttributes(name, { entityType: type, color: this.colorOf(type), observations })
      return
    }
    const color = this.colorOf(type)
    this.graph.addNode(name, {
      ...this.spotFor(name, near),
      size: 3,
      color,
      label: name,
      entityType: type,
      observations,
    })
  }

  private addEdge(from: string, to: string, type: string) {
    const key = edgeKey(from, type, to)
    if (!this.graph.hasNode(from) || !this.graph.hasNode(to) || this.graph.hasEdge(key)) return false
    this.graph.addDirectedEdgeWithKey(key, from, to, { relationType: type, size: 1 })
    return true
  }

  // ---- data ----------------------------------------------------------------------------------

  /** Replaces the graph with `data`, keeping the places of nodes that stay. */
  load(data: GraphData): void {
    const previous = new Map<string, { x: number; y: number }>()
    this.graph.forEachNode((node, attributes) => previous.set(node, { x: attributes.x, y: attributes.y }))
    const fresh = previous.size === 0
    // A reload in the middle of a layout run (a resync) continues the run rather than cutting it short.
    const remainingMs = this.layoutRunning ? this.layoutUntil - Date.now() : 0
    this.stopLayout()
    this.graph.clear()
    if (fresh) this.typeColors.clear()
    this.assignColors(data.nodes.map((node) => node.type))
    for (const node of data.nodes) {
      this.addNode(node.id, node.type, node.observations)
      const kept = previous.get(node.id)
      if (kept !== undefined) this.graph.mergeNodeAttributes(node.id, kept)
    }
    for (const edge of data.edges) this.addEdge(edge.from, edge.to, edge.type)
    this.resize(this.graph.nodes())
    if (this.selected !== undefined && !this.graph.hasNode(this.selected)) this.select(undefined)
    this.refreshNeighbours()
    this.callbacks.onChange()
    if (fresh) {
      // A new graph (the first load, another project) is shown whole, whatever the camera did before.
      this.renderer.getCamera().setState({ x: 0.5, y: 0.5, ratio: 1, angle: 0 })
      this.runLayout(Math.min(layoutMsMax, 2500 + this.graph.order * 1.2))
    } else if (remainingMs > 0 || this.graph.order !== previous.size) this.runLayout(Math.max(1500, remainingMs))
  }

  /** Applies live graph events of this project; false when they need a full reload. */
  apply(events: ReadonlyArray<LiveEvent>): boolean {
    const touched = new Set<string>()
    let grew = false
    for (const event of events) {
      const graph = event.graph
      if (graph === undefined) continue
      if (graph.partial === true) return false
      for (const entity of graph.entities ?? []) {
        grew ||= !this.graph.hasNode(entity.name)
        this.addNode(entity.name, entity.type, entity.observations)
        touched.add(entity.name)
      }
      for (const relation of graph.relations ?? []) {
        if (!this.graph.hasNode(relation.from) || !this.graph.hasNode(relation.to)) return false
        if (this.addEdge(relation.from, relation.to, relation.type)) {
          touched.add(relation.from)
          touched.add(relation.to)
        }
      }
      for (const change of graph.observed ?? []) {
        if (!this.graph.hasNode(change.name)) continue
        this.graph.updateNodeAttribute(change.name, "observations", (count) => Math.max(0, (count ?? 0) + change.delta))
        touched.add(change.name)
      }
      for (const relation of graph.relationsRemoved ?? []) {
        const key = edgeKey(relation.from, relation.type, relation.to)
        if (this.graph.hasEdge(key)) this.graph.dropEdge(key)
        touched.add(relation.from)
        touched.add(relation.to)
      }
      for (const name of graph.removed ?? []) {
        if (!this.graph.hasNode(name)) continue
        const neighbours = this.graph.neighbors(name)
        this.graph.dropNode(name)
        for (const neighbour of neighbours) touched.add(neighbour)
        if (this.selected === name) this.select(undefined)
      }
    }
    this.resize(touched)
    this.flash(touched)
    this.refreshNeighbours()
    this.callbacks.onChange()
    if (grew) this.runLayout(1500)
    return true
  }

  private flash(nodes: Iterable<string>) {
    const until = Date.now() + flashMs
    for (const node of nodes) if (this.graph.hasNode(node)) this.flashing.set(node, until)
    clearTimeout(this.flashTimer)
    const expire = () => {
      const now = Date.now()
      for (const [node, at] of this.flashing) if (at <= now) this.flashing.delete(node)
      this.renderer.refresh({ skipIndexation: true })
      if (this.flashing.size > 0) this.flashTimer = setTimeout(expire, 250)
    }
    this.flashTimer = setTimeout(expire, 250)
  }

  // ---- interaction ---------------------------------------------------------------------------

  private refreshNeighbours() {
    this.neighbours =
      this.selected !== undefined && this.graph.hasNode(this.selected)
        ? new Set(this.graph.neighbors(this.selected))
        : new Set()
  }

  select(node: string | undefined): void {
    this.selected = node !== undefined && this.graph.hasNode(node) ? node : undefined
    this.refreshNeighbours()
    this.renderer.refresh({ skipIndexation: true })
  }

  /** Selects `node` and flies the camera to it. */
  focus(node: string): void {
    if (!this.graph.hasNode(node)) return
    this.select(node)
    const display = this.renderer.getNodeDisplayData(node)
    const camera = this.renderer.getCamera()
    const ratio = Math.min(camera.ratio, 0.45)
    if (display !== undefined) void camera.animate({ x: display.x, y: display.y, ratio }, { duration: 600 })
  }

  setHiddenTypes(types: ReadonlySet<string>): void {
    this.hiddenTypes = types
    this.renderer.refresh({ skipIndexation: true })
  }

  /** Entity types with their counts, most common first. */
  types(): Array<[string, number]> {
    const counts = new Map<string, number>()
    this.graph.forEachNode((_node, attributes) =>
      counts.set(attributes.entityType, (counts.get(attributes.entityType) ?? 0) + 1),
    )
    return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
  }

  /** Up to `limit` node names matching `query`: prefix matches first. */
  find(query: string, limit: number): Array<string> {
    const needle = query.trim().toLowerCase()
    if (needle === "") return []
    const prefix: Array<string> = []
    const inner: Array<string> = []
    for (const node of this.graph.nodes()) {
      const name = node.toLowerCase()
      if (name.startsWith(needle)) prefix.push(node)
      else if (inner.length < limit && name.includes(needle)) inner.push(node)
      if (prefix.length >= limit) break
    }
    return [...prefix.sort((a, b) => a.length - b.length), ...inner].slice(0, limit)
  }

  zoomIn(): void {
    void this.renderer.getCamera().animatedZoom({ duration: 250 })
  }
  zoomOut(): void {
    void this.renderer.getCamera().animatedUnzoom({ duration: 250 })
  }
  fit(): void {
    void this.renderer.getCamera().animatedReset({ duration: 400 })
  }
  /** Call when the container becomes visible or changes size. */
  resizeView(): void {
    this.renderer.resize()
    this.renderer.refresh()
  }

  // ---- layout --------------------------------------------------------------------------------

  get layoutRunning(): boolean {
    return this.layout?.isRunning() ?? false
  }

  /** Runs ForceAtlas2 for `ms` (in a worker). */
  runLayout(ms: number): void {
    if (this.graph.order < 2) return
    if (this.layout === undefined) {
      const settings = forceAtlas2.inferSettings(this.graph)
      this.layout = new FA2Layout(this.graph, {
        settings: {
          ...settings,
          barnesHutOptimize: this.graph.order > 800,
          slowDown: Math.max(1, Math.log10(this.graph.order)),
        },
      })
    }
    if (!this.layout.isRunning()) this.layout.start()
    clearTimeout(this.layoutTimer)
    this.layoutUntil = Math.max(this.layoutRunning ? this.layoutUntil : 0, Date.now() + ms)
    this.layoutTimer = setTimeout(() => this.stopLayout(), this.layoutUntil - Date.now())
    this.callbacks.onChange()
  }

  stopLayout(): void {
    clearTimeout(this.layoutTimer)
    if (this.layout?.isRunning()) this.layout.stop()
    this.callbacks.onChange()
  }

  kill(): void {
    clearTimeout(this.layoutTimer)
    clearTimeout(this.flashTimer)
    this.themeObserver.disconnect()
    this.layout?.kill()
    this.renderer.kill()
  }
}
