/**
 * The page's live link to the daemon: the `/events` WebSocket of committed events.
 *
 * One connection per page. It reconnects with backoff (`retryDelayMsMin` doubling to
 * `retryDelayMsMax`) and says where it stands: `connecting`, `live`, `offline` (the daemon is
 * unreachable: data on screen may be stale) or `locked` (the login is gone). Every `hello` — the
 * first one and each after a reconnect — and every `resync` the daemon sends is announced as a
 * resync, so views re-read what they show: events missed while away are never assumed. A
 * connection silent for `silenceMsMax` (the daemon pings every 10 s) counts as dead.
 */

import { ApiFailure, api, onUnauthorized } from "./api.ts"
import type { LiveEvent } from "./LiveEvent.ts"

export const retryDelayMsMin = 500
export const retryDelayMsMax = 5_000
export const silenceMsMax = 25_000

export type { LiveEvent }

export type ConnectionStatus = "connecting" | "live" | "offline" | "locked"

export interface ConnectionState {
  readonly status: ConnectionStatus
  /** When the daemon became unreachable. */
  readonly offlineSince?: number
  /** When the next attempt starts. */
  readonly retryAt?: number
  /** When the connection last came back after being offline. */
  readonly reconnectedAt?: number
}

type Listener<A> = (value: A) => void

class LiveConnection {
  private socket: WebSocket | undefined
  private retryTimer: ReturnType<typeof setTimeout> | undefined
  private attempt = 0
  private lastMessageAt = 0
  private started = false
  private current: ConnectionState = { status: "connecting" }
  private readonly eventListeners = new Set<Listener<ReadonlyArray<LiveEvent>>>()
  private readonly stateListeners = new Set<Listener<ConnectionState>>()
  private readonly resyncListeners = new Set<Listener<number>>()

  get state(): ConnectionState {
    return this.current
  }

  start(): void {
    if (this.started) return
    this.started = true
    onUnauthorized(() => this.lock())
    setInterval(() => {
      if (this.current.status === "live" && Date.now() - this.lastMessageAt > silenceMsMax) this.socket?.close()
    }, 5_000)
    this.connect()
  }

  /** Tries again now (the "Retry now" button). */
  retryNow(): void {
    if (this.current.status === "live" || this.current.status === "connecting") return
    clearTimeout(this.retryTimer)
    this.connect()
  }

  onEvents(listener: Listener<ReadonlyArray<LiveEvent>>): () => void {
    this.eventListeners.add(listener)
    return () => this.eventListeners.delete(listener)
  }
  onState(listener: Listener<ConnectionState>): () => void {
    this.stateListeners.add(listener)
    return () => this.stateListeners.delete(listener)
  }
  /** Called with the time of every resync (connected, reconnected, or told to). */
  onResync(listener: Listener<number>): () => void {
    this.resyncListeners.add(listener)
    return () => this.resyncListeners.delete(listener)
  }

  private setState(next: ConnectionState) {
    this.current = next
    for (const listener of this.stateListeners) listener(next)
  }

  private lock() {
    if (this.current.status === "locked") return
    clearTimeout(this.retryTimer)
    this.socket?.close()
    this.setState({ status: "locked" })
  }

  private resync() {
    const at = Date.now()
    for (const listener of this.resyncListeners) listener(at)
  }

  private connect() {
    if (this.current.status !== "offline") this.setState({ ...this.current, status: "connecting" })
    const scheme = location.protocol === "https:" ? "wss" : "ws"
    const socket = new WebSocket(`${scheme}://${location.host}/events`)
    this.socket = socket
    socket.onmessage = (message) => {
      this.lastMessageAt = Date.now()
      let data: { type?: string; events?: ReadonlyArray<LiveEvent> }
      try {
        data = JSON.parse(String(message.data))
      } catch {
        return
      }
      if (data.type === "hello") {
        const wasOffline = this.current.status === "offline"
        this.attempt = 0
        this.setState({ status: "live", ...(wasOffline ? { reconnectedAt: Date.now() } : {}) })
        this.resync()
      } else if (data.type === "events" && data.events !== undefined) {
        for (const listener of this.eventListeners) listener(data.events)
      } else if (data.type === "resync") this.resync()
    }
    socket.onclose = () => {
      if (this.socket !== socket || this.current.status === "locked") return
      this.socket = undefined
      void this.afterClose()
    }
  }

  private async afterClose() {
    // Was the connection refused because the login is gone, or is the daemon away?
    try {
      await api("/api/dashboard/session")
    } catch (error) {
      if (error instanceof ApiFailure && error.status === 401) return this.lock()
    }
    const delay = Math.min(retryDelayMsMax, retryDelayMsMin * 2 ** this.attempt)
    this.attempt++
    const offlineSince = this.current.status === "offline" ? this.current.offlineSince : Date.now()
    this.setState({ status: "offline", retryAt: Date.now() + delay, ...(offlineSince ? { offlineSince } : {}) })
    this.retryTimer = setTimeout(() => this.connect(), delay)
  }
}

/** The page's one connection. */
export const live = new LiveConnection()
