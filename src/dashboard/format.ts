/** How numbers, sizes and times read on the page. */

const numberFormat = new Intl.NumberFormat("en")
const compactFormat = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 1 })

export const formatCount = (value: number): string =>
  value >= 100_000 ? compactFormat.format(value) : numberFormat.format(value)

export const formatBytes = (bytes: number | undefined): string => {
  if (bytes === undefined) return "—"
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return `${value >= 100 || unit === 0 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`
}

export const formatMs = (ms: number | null | undefined): string => {
  if (ms === null || ms === undefined) return "—"
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`
  if (ms < 10) return `${ms.toFixed(1)} ms`
  return `${Math.round(ms)} ms`
}

export const formatDuration = (seconds: number): string => {
  if (seconds < 60) return `${seconds}s`
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${seconds % 60}s`
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`
  return `${Math.floor(seconds / 86_400)}d ${Math.floor((seconds % 86_400) / 3600)}h`
}

/** Milliseconds since the epoch from an ISO string or a number (seconds or milliseconds). */
export const toMillis = (time: string | number | undefined): number | undefined => {
  if (time === undefined) return undefined
  if (typeof time === "number") return time < 1e12 ? time * 1000 : time
  const parsed = Date.parse(time)
  return Number.isNaN(parsed) ? undefined : parsed
}

/** "just now", "5 s ago", "3 min ago", "2 h ago", else the date. */
export const formatAgo = (time: string | number | undefined, now: number): string => {
  const at = toMillis(time)
  if (at === undefined) return ""
  const seconds = Math.round((now - at) / 1000)
  // The page's clock ticks in steps: a write a moment after the last tick is "just now", not "in 1s".
  if (seconds < -60) return `in ${formatDuration(-seconds)}`
  if (seconds < 3) return "just now"
  if (seconds < 60) return `${seconds} s ago`
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`
  return new Date(at).toLocaleDateString()
}

/** The full date and time, for tooltips. */
export const formatDateTime = (time: string | number | undefined): string => {
  const at = toMillis(time)
  return at === undefined ? "" : new Date(at).toLocaleString()
}

/** A short client name: "claude-code/1.2 (ws)" → "claude-code". */
export const shortAgent = (who: string): string => who.split(/[\s/(@]/, 1)[0] || who

/** Distinct colours for entity types, most distinct first (readable on dark and light). */
export const typePalette = [
  "#8b5cf6",
  "#22d3ee",
  "#f59e0b",
  "#10b981",
  "#f43f5e",
  "#3b82f6",
  "#e879f9",
  "#84cc16",
  "#fb923c",
  "#14b8a6",
  "#eab308",
  "#94a3b8",
]
const palette = typePalette

/** A stable colour for a name (entity types, stores, agents). */
export const colorOf = (name: string): string => {
  let hash = 2166136261
  for (let index = 0; index < name.length; index++) hash = Math.imul(hash ^ name.charCodeAt(index), 16777619)
  return palette[Math.abs(hash) % palette.length]!
}
