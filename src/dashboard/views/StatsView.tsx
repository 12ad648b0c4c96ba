/**
 * Stats: how much is stored and how the engine is doing — counts, sizes, write rate, search
 * latency, actor restarts and index lag, with small charts. Health numbers change without
 * events, so this view also polls every few seconds.
 */
import type { ComponentChildren } from "preact"
import { api, type MetricsData, type StatsData, type StoreHealth } from "../api.ts"
import { Badge, Bars, Load, Sparkline, ViewHeader } from "../components.tsx"
import { formatBytes, formatCount, formatDuration, formatMs } from "../format.ts"
import { useResource } from "../hooks.ts"

/** Seconds per bar of the write-rate chart. */
const rateBinSeconds = 10

interface SearchHealth {
  readonly state?: string
  readonly lagEvents?: number
  readonly lastLagMs?: number
  readonly maxLagMs?: number
  readonly pendingEmbeddings?: number
  readonly storageBytes?: number
  readonly index?: { readonly documents?: number; readonly vectors?: number }
  readonly reembedding?: {
    readonly done: number
    readonly total: number
    readonly finished: boolean
    readonly to: string
    readonly previousModel?: string
  }
}

const stateTone = (state: string) =>
  state === "running" ? "ok" : state === "restarting" || state === "starting" ? "warn" : "bad"

const binned = (values: ReadonlyArray<number>, size: number) => {
  const bins: Array<number> = []
  for (let index = 0; index < values.length; index += size)
    bins.push(values.slice(index, index + size).reduce((a, b) => a + b, 0) / size)
  return bins
}

const Kpi = (props: {
  label: string
  wide?: boolean
  value: ComponentChildren
  detail?: ComponentChildren
  children?: ComponentChildren
  tone?: string
}) => (
  <div class={`kpi ${props.tone ?? ""} ${props.wide ? "wide" : ""}`}>
    <p class="kpi-label">{props.label}</p>
    <p class="kpi-value">{props.value}</p>
    {props.detail !== undefined && <p class="kpi-detail">{props.detail}</p>}
    {props.children}
  </div>
)

/** `/api/cluster`: the shared memory's daemons (src/cluster/Presence.ts), or `{shared: false}`. */
interface ClusterData {
  readonly shared: boolean
  readonly prefix?: string
  readonly servers?: ReadonlyArray<string>
  readonly connected?: boolean
  readonly server?: string
  readonly lastError?: string
  readonly daemons?: ReadonlyArray<{
    readonly daemonId: string
    readonly host: string
    readonly pid: number
    readonly self: boolean
    readonly live: boolean
    readonly silentMs: number
    readonly stores: ReadonlyArray<{ readonly name: string; readonly position: number; readonly behind?: number }>
  }>
  readonly writers?: ReadonlyArray<{ readonly store: string; readonly holder?: string }>
}

/** Which daemons serve the shared memory, and how many batches each has still to apply. */
const SharedMemoryPanel = (props: { cluster: ClusterData }) => {
  const { cluster } = props
  if (!cluster.shared) return null
  const daemons = cluster.daemons ?? []
  const writers = cluster.writers ?? []
  const writerOf = (daemonId: string) =>
    writers.filter((writer) => writer.holder === daemonId).map((writer) => writer.store)
  const unheld = writers.filter((writer) => writer.holder === undefined).map((writer) => writer.store)
  return (
    <>
      <h2 class="section-title">Shared memory “{cluster.prefix}”</h2>
      <p class="muted small" data-testid="cluster-connection">
        {cluster.connected
          ? `NATS ${cluster.server ?? cluster.servers?.join(", ")} · ${daemons.filter((daemon) => daemon.live).length} of ${daemons.length} daemon(s) live`
          : `NATS out of reach (${cluster.servers?.join(", ")})${cluster.lastError ? `: ${cluster.lastError}` : ""} · reads are served from this daemon's copy, writes fail`}
      </p>
      <div class="table-wrap">
        <table class="table" data-testid="cluster-table">
          <caption class="visually-hidden">The daemons of the shared memory</caption>
          <thead>
            <tr>
              <th scope="col">Daemon</th>
              <th scope="col">State</th>
              <th scope="col">Host</th>
              <th scope="col" class="num">
                Behind
              </th>
              <th scope="col">Stores behind</th>
              <th scope="col">Writer of</th>
            </tr>
          </thead>
          <tbody>
            {daemons.map((daemon) => {
              const behind = daemon.stores.reduce((sum, store) => sum + (store.behind ?? 0), 0)
              const lagging = daemon.stores.filter((store) => (store.behind ?? 0) > 0)
              return (
                <tr key={daemon.daemonId} aria-current={daemon.self ? "true" : undefined}>
                  <th scope="row">
                    {daemon.daemonId}
                    {daemon.self ? " (this one)" : ""}
                  </th>
                  <td>
                    <Badge tone={daemon.live ? "ok" : "bad"}>
                      {daemon.live ? "live" : `silent ${formatDuration(Math.round(daemon.silentMs / 1000))}`}
                    </Badge>
                  </td>
                  <td>
                    {daemon.host} · pid {daemon.pid}
                  </td>
                  <td class="num">{formatCount(behind)}</td>
                  <td>
                    {lagging.length === 0
                      ? "caught up"
                      : lagging.map((store) => `${store.name} ${formatCount(store.behind ?? 0)}`).join(", ")}
                  </td>
                  <td data-testid="cluster-writer-of">{writerOf(daemon.daemonId).join(", ") || "—"}</td>
                </tr>
              )
            })}
          </tbody>
        </table>
      </div>
      {unheld.length > 0 && (
        <p class="muted small" data-testid="cluster-unheld">
          No writer at the moment (a lease is moving; writes to these wait for it): {unheld.join(", ")}
        </p>
      )}
    </>
  )
}

export const StatsView = (props: { project: string }) => {
  const stats = useResource(() => api<StatsData>("/api/stats"), [], { stores: "all", pollMs: 3000 })
  const cluster = useResource(() => api<ClusterData>("/api/cluster").catch(() => ({ shared: false })), [], {
    stores: [],
    pollMs: 2000,
  })
  const metrics = useResource(() => api<MetricsData>("/api/dashboard/metrics"), [], { stores: "all", pollMs: 2000 })
  const health = useResource(() => api<SearchHealth>("/api/search/health").catch(() => undefined), [], {
    stores: [],
    pollMs: 5000,
  })
  return (
    <section class="view stats-view" aria-labelledby="stats-title">
      <ViewHeader title="Stats" subtitle="Counts, sizes and the engine's health, live." />
      <Load resource={stats} what="Stats">
        {(data) => <StatsBody stats={data} metrics={metrics.data} health={health.data} project={props.project} />}
      </Load>
      {cluster.data !== undefined && <SharedMemoryPanel cluster={cluster.data} />}
    </section>
  )
}

const StatsBody = (props: {
  stats: StatsData
  metrics: MetricsData | undefined
  health: SearchHealth | undefined
  project: string
}) => {
  const { stats, metrics, health } = props
  const here = stats.projects.find((entry) => entry.project === props.project)
  const entities = stats.projects.reduce((sum, entry) => sum + entry.entities, 0)
  const relations = stats.projects.reduce((sum, entry) => sum + entry.relations, 0)
  const restarts = stats.stores.reduce((sum, store) => sum + store.restarts, 0)
  const perSecond = metrics?.writes.perSecond ?? []
  const lastMinute = perSecond.slice(-60)
  const ratePerSecond = lastMinute.reduce((a, b) => a + b, 0) / Math.max(1, lastMinute.length)
  const diskBytes = stats.stores.reduce((sum, store) => sum + (store.wal?.bytes ?? 0) + (store.lmdbBytes ?? 0), 0)
  const maxEntities = Math.max(1, ...stats.projects.map((entry) => entry.entities))
  return (
    <>
      <div class="kpis" data-testid="kpis">
        <Kpi
          label="Entities"
          value={formatCount(here?.entities ?? 0)}
          detail={`in “${props.project}” · ${formatCount(entities)} in all projects`}
        />
        <Kpi
          label="Relations"
          value={formatCount(here?.relations ?? 0)}
          detail={`in “${props.project}” · ${formatCount(relations)} in all projects`}
        />
        <Kpi
          label="On disk"
          value={formatBytes(diskBytes + (health?.storageBytes ?? 0))}
          detail="write-ahead logs, checkpoints, indexes"
        />
        <Kpi
          label="Actor restarts"
          value={formatCount(restarts)}
          tone={restarts > 0 ? "warn" : ""}
          detail={`${stats.stores.filter((store) => store.state === "running").length} of ${stats.stores.length} stores running`}
        />
        <Kpi
          wide
          label="Write rate"
          value={`${ratePerSecond.toFixed(ratePerSecond < 10 ? 1 : 0)}/s`}
          detail="committed events per second, last minute"
        >
          <Bars
            values={binned(perSecond, rateBinSeconds)}
            label={`Writes per second over the last ${Math.round(perSecond.length / 60)} minutes`}
          />
          <p class="chart-axis" aria-hidden="true">
            <span>{Math.round(perSecond.length / 60)} min ago</span>
            <span>now</span>
          </p>
        </Kpi>
        <Kpi
          wide
          label="Search latency"
          value={formatMs(metrics?.search.p50Ms)}
          detail={`median · p95 ${formatMs(metrics?.search.p95Ms)} · ${metrics?.search.count ?? 0} searches in 10 min`}
        >
          <Sparkline values={metrics?.search.recentMs ?? []} label="Latency of recent dashboard searches" />
          <p class="chart-axis" aria-hidden="true">
            <span>earlier searches</span>
            <span>latest</span>
          </p>
        </Kpi>
        <Kpi
          label="Index lag"
          value={health?.lagEvents !== undefined ? `${formatCount(health.lagEvents)} events` : "—"}
          detail={
            health !== undefined
              ? `last batch ${formatMs(health.lastLagMs)} behind · ${formatCount(health.pendingEmbeddings ?? 0)} embeddings pending`
              : "search index health not available"
          }
          tone={(health?.lagEvents ?? 0) > 1000 ? "warn" : ""}
        />
        <Kpi
          label="Search index"
          value={health?.index?.documents !== undefined ? formatCount(health.index.documents) : "—"}
          detail={
            health?.index !== undefined
              ? `documents · ${formatCount(health.index.vectors ?? 0)} vectors${
                  health.reembedding !== undefined && !health.reembedding.finished
                    ? ` · re-embedding ${formatCount(health.reembedding.done)} of ${formatCount(health.reembedding.total)} for the new model (${
                        health.reembedding.previousModel === "unavailable"
                          ? "meaning search covers those only"
                          : "the previous model answers until then"
                      })`
                    : ""
                }`
              : ""
          }
        />
        <Kpi
          label="Writes"
          value={formatCount(Object.values(metrics?.writes.totalByStore ?? {}).reduce((a, b) => a + b, 0))}
          detail="committed since the daemon started"
        />
        <Kpi
          label="Daemon"
          value={metrics !== undefined ? formatDuration(metrics.process.uptimeSeconds) : "—"}
          detail={
            metrics !== undefined
              ? `up · ${formatBytes(metrics.process.rssBytes)} memory · ${metrics.pagesOpen} page(s) open`
              : ""
          }
        />
      </div>

      <h2 class="section-title">Stores</h2>
      <div class="table-wrap">
        <table class="table" data-testid="stores-table">
          <caption class="visually-hidden">Health of every store</caption>
          <thead>
            <tr>
              <th scope="col">Store</th>
              <th scope="col">State</th>
              <th scope="col" class="num">
                Restarts
              </th>
              <th scope="col" class="num">
                Last seq
              </th>
              <th scope="col" class="num">
                Writes seen
              </th>
              <th scope="col" class="num">
                Mailbox
              </th>
              <th scope="col" class="num">
                WAL
              </th>
              <th scope="col" class="num">
                Checkpoint
              </th>
            </tr>
          </thead>
          <tbody>
            {stats.stores.map((store: StoreHealth) => (
              <tr key={store.name}>
                <th scope="row">{store.name}</th>
                <td>
                  <Badge tone={stateTone(store.state)} title={store.lastError}>
                    {store.state}
                  </Badge>
                </td>
                <td class="num">{store.restarts}</td>
                <td class="num">{formatCount(store.appliedSeq)}</td>
                <td class="num">{formatCount(metrics?.writes.totalByStore[store.name] ?? 0)}</td>
                <td class="num">{store.mailboxDepth}</td>
                <td class="num">{formatBytes(store.wal?.bytes)}</td>
                <td class="num">{formatBytes(store.lmdbBytes)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>

      <h2 class="section-title">Projects</h2>
      <div class="table-wrap">
        <table class="table">
          <caption class="visually-hidden">Entities, relations, tasks and tech debt per project</caption>
          <thead>
            <tr>
              <th scope="col">Project</th>
              <th scope="col" class="num">
                Entities
              </th>
              <th scope="col" class="num">
                Relations
              </th>
              <th scope="col" class="num">
                Tasks
              </th>
              <th scope="col" class="num">
                Tech debt
              </th>
              <th scope="col" class="bar-col">
                <span class="visually-hidden">Share</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {stats.projects.map((entry) => (
              <tr key={entry.project} aria-current={entry.project === props.project ? "true" : undefined}>
                <th scope="row">{entry.project}</th>
                <td class="num">{formatCount(entry.entities)}</td>
                <td class="num">{formatCount(entry.relations)}</td>
                <td class="num">{formatCount(entry.tasks ?? 0)}</td>
                <td class="num">{formatCount(entry.techDebt ?? 0)}</td>
                <td class="bar-col">
                  <span class="bar" style={{ width: `${(entry.entities / maxEntities) * 100}%` }} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p class="muted small">
        mnemos {stats.version.version}
        {stats.version.gitCommit ? ` · ${stats.version.gitCommit}` : ""}
        {stats.version.builtAt ? ` · built ${new Date(stats.version.builtAt).toLocaleString()}` : ""}
      </p>
    </>
  )
}
