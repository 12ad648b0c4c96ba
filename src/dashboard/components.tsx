/** Small pieces every view uses: states (loading, empty, not available, error), times, charts. */
import type { ComponentChildren } from "preact"
import type { ApiFailure } from "./api.ts"
import { formatAgo, formatDateTime } from "./format.ts"
import type { Resource } from "./hooks.ts"
import { hasIcon, Icon } from "./icons.tsx"

export const ViewHeader = (props: { title: string; subtitle?: ComponentChildren; children?: ComponentChildren }) => (
  <header class="view-header">
    <div>
      <h1 id={`${props.title.toLowerCase()}-title`}>{props.title}</h1>
      {props.subtitle !== undefined && <p class="subtitle">{props.subtitle}</p>}
    </div>
    {props.children !== undefined && <div class="view-actions">{props.children}</div>}
  </header>
)

export const Empty = (props: { title: string; children?: ComponentChildren; icon?: string }) => (
  <div class="empty" role="status">
    <div class="empty-icon" aria-hidden="true">
      {props.icon !== undefined && hasIcon(props.icon) ? <Icon name={props.icon} size={28} /> : (props.icon ?? "◌")}
    </div>
    <p class="empty-title">{props.title}</p>
    {props.children !== undefined && <div class="empty-body">{props.children}</div>}
  </div>
)

export const Loading = (props: { label?: string }) => (
  <div class="loading" role="status" aria-live="polite">
    <span class="spinner" aria-hidden="true" />
    {props.label ?? "Loading…"}
  </div>
)

export const Failure = (props: { error: ApiFailure; what: string; onRetry?: () => void }) => {
  if (props.error.notAvailable)
    return (
      <Empty title={`${props.what} is not available yet`} icon="clock">
        This daemon does not offer it yet ({props.error.message}). It appears here as soon as a daemon that does is
        running.
      </Empty>
    )
  return (
    <div class="failure" role="alert">
      <strong>Could not load {props.what.toLowerCase()}.</strong> <span>{props.error.message}</span>
      {props.onRetry !== undefined && (
        <button type="button" class="button small" onClick={props.onRetry}>
          Retry
        </button>
      )}
    </div>
  )
}

/** Renders a resource: loading, failure, or `children(data)`. */
export const Load = <T,>(props: { resource: Resource<T>; what: string; children: (data: T) => ComponentChildren }) => {
  const { data, error, refresh } = props.resource
  if (data === undefined) {
    if (error !== undefined) return <Failure error={error} what={props.what} onRetry={refresh} />
    return <Loading label={`Loading ${props.what.toLowerCase()}…`} />
  }
  return (
    <>
      {error !== undefined && !error.offline && <Failure error={error} what={props.what} onRetry={refresh} />}
      {props.children(data)}
    </>
  )
}

export const Ago = (props: { time: string | number | undefined; now: number }) => (
  <time
    dateTime={props.time === undefined ? undefined : new Date(props.time).toISOString()}
    title={formatDateTime(props.time)}
  >
    {formatAgo(props.time, props.now)}
  </time>
)

export const Badge = (props: { tone?: string; children: ComponentChildren; title?: string }) => (
  <span class={`badge ${props.tone ?? ""}`} title={props.title}>
    {props.children}
  </span>
)

/** A line chart of `values` (oldest first), scaled to its own maximum. */
export const Sparkline = (props: { values: ReadonlyArray<number>; label: string; width?: number; height?: number }) => {
  const width = props.width ?? 240
  const height = props.height ?? 48
  const values = props.values.length > 1 ? props.values : [props.values[0] ?? 0, props.values[0] ?? 0]
  const max = Math.max(1e-9, ...values)
  const step = width / (values.length - 1)
  const points = values.map(
    (value, index) => `${(index * step).toFixed(1)},${(height - 2 - (value / max) * (height - 6)).toFixed(1)}`,
  )
  return (
    <svg
      class="sparkline"
      viewBox={`0 0 ${width} ${height}`}
      width="100%"
      height={height}
      role="img"
      aria-label={props.label}
      preserveAspectRatio="none"
    >
      <polygon class="spark-area" points={`0,${height} ${points.join(" ")} ${width},${height}`} />
      <polyline class="spark-line" points={points.join(" ")} />
    </svg>
  )
}

/** A bar chart of `values` (oldest first). */
export const Bars = (props: { values: ReadonlyArray<number>; label: string; height?: number }) => {
  const height = props.height ?? 64
  const width = Math.max(1, props.values.length) * 6
  const max = Math.max(1, ...props.values)
  return (
    <svg
      class="bars"
      viewBox={`0 0 ${width} ${height}`}
      width="100%"
      height={height}
      role="img"
      aria-label={props.label}
      preserveAspectRatio="none"
    >
      <line class="baseline" x1={0} x2={width} y1={height - 0.5} y2={height - 0.5} />
      {props.values.map((value, index) => {
        const barHeight = value === 0 ? 0 : Math.max(1.5, (value / max) * (height - 4))
        return <rect key={index} x={index * 6 + 1} y={height - barHeight} width={4} height={barHeight} rx={1} />
      })}
    </svg>
  )
}

/** A horizontal bar of a 0..1 share; decorative (the number is always printed beside it). */
export const Meter = (props: { value: number; tone?: string }) => (
  <span class={`meter ${props.tone ?? ""}`} aria-hidden="true">
    <span style={{ width: `${Math.max(0, Math.min(1, props.value)) * 100}%` }} />
  </span>
)
