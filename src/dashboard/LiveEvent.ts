/**
 * The wire shape of one committed event on the dashboard's `/events` socket, shared by the server
 * (src/transports/DashboardEvents.ts, which cuts committed events down to it) and the browser.
 * Types only: the browser bundle imports nothing else from the server.
 */
/** A committed event as the dashboard sees it. */
export interface LiveEvent {
  readonly store: string
  readonly seq: number
  readonly at: number
  readonly tag: string
  readonly project?: string
  /** In a shared memory: the daemon that wrote it (absent for this daemon's own writes). */
  readonly origin?: string
  /** Graph changes: what appeared or went. */
  readonly graph?: {
    readonly entities?: ReadonlyArray<{ readonly name: string; readonly type: string; readonly observations: number }>
    readonly relations?: ReadonlyArray<{ readonly from: string; readonly to: string; readonly type: string }>
    readonly removed?: ReadonlyArray<string>
    readonly observed?: ReadonlyArray<{ readonly name: string; readonly delta: number }>
    readonly relationsRemoved?: ReadonlyArray<{ readonly from: string; readonly to: string; readonly type: string }>
    /** More changed than listed (or a merge): re-read the graph. */
    readonly partial?: boolean
  }
  /** Record stores (tasks, notes, gates, ...): which record changed. */
  readonly record?: {
    readonly change: string
    readonly kind: string
    readonly id: string
    readonly title: string
    readonly tool: string
    readonly by: string
    readonly status?: string
  }
}
