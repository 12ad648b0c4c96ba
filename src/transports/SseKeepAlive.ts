/**
 * The keepalive of a server-sent-events stream (legacy SSE and Streamable HTTP): a comment line
 * every `sseKeepAliveMs`, which no client reads as a message, so that proxies and clients with idle
 * timeouts do not cut a quiet stream. The same interval and timer as the MCP SDK's transports.
 */

/** How often a quiet stream carries a keepalive comment, in ms (the MCP SDK's default). */
export const sseKeepAliveMs = 15_000

/** The longest delay Node's timers take (a longer one fires at once). */
const timerDelayMsMax = 2 ** 31 - 1

/** Calls `onTick` every `intervalMs` without keeping the process alive; none for a non-positive interval. */
export const armSseKeepAlive = (intervalMs: number, onTick: () => void): NodeJS.Timeout | undefined => {
  if (!Number.isFinite(intervalMs) || intervalMs < 1) return undefined
  const timer = setInterval(onTick, Math.min(intervalMs, timerDelayMsMax))
  timer.unref()
  return timer
}
