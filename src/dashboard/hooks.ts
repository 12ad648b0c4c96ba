/**
 * Hooks shared by the views: data that stays fresh by itself (`useResource`), the connection's
 * state, the current time for "3 s ago" labels, and ids that changed a moment ago (to flash them).
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import { ApiFailure } from "./api.ts"
import { type ConnectionState, type LiveEvent, live } from "./live.ts"

/** How long after an event a view waits for more before it re-reads (events come in bursts). */
export const refreshDebounceMs = 120

/** Data a view shows, and how it stands. */
export interface Resource<T> {
  readonly data: T | undefined
  readonly error: ApiFailure | undefined
  readonly loading: boolean
  readonly refresh: () => void
}

/** Which events make a resource stale. */
export interface Freshness {
  /** Stores whose events matter ("all": every store's). */
  readonly stores: ReadonlyArray<string> | "all"
  /** Only events of this project (events without a project always count). */
  readonly project?: string
  /** Re-read this often anyway (for numbers that change without events). */
  readonly pollMs?: number
}

/** Loads data with `load`, and loads it again whenever a relevant event arrives or the page resyncs. */
export const useResource = <T>(load: () => Promise<T>, deps: ReadonlyArray<unknown>, fresh: Freshness): Resource<T> => {
  const [state, setState] = useState<{ data: T | undefined; error: ApiFailure | undefined; loading: boolean }>({
    data: undefined,
    error: undefined,
    loading: true,
  })
  const generation = useRef(0)
  const startedAt = useRef(0)
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined)
  const freshRef = useRef(fresh)
  freshRef.current = fresh

  const refresh = useCallback(() => {
    const mine = ++generation.current
    startedAt.current = Date.now()
    setState((previous) => ({ ...previous, loading: true }))
    load().then(
      (data) => {
        if (mine === generation.current) setState({ data, error: undefined, loading: false })
      },
      (error: unknown) => {
        if (mine !== generation.current) return
        const failure = error instanceof ApiFailure ? error : new ApiFailure(500, String(error))
        // Keep showing the last data while the daemon is away; the banner says it may be stale.
        setState((previous) => ({ data: previous.data, error: failure, loading: false }))
      },
    )
  }, deps)

  useEffect(() => {
    setState({ data: undefined, error: undefined, loading: true })
    refresh()
    const soon = () => {
      clearTimeout(timer.current)
      timer.current = setTimeout(refresh, refreshDebounceMs)
    }
    const offEvents = live.onEvents((events) => {
      const { stores, project } = freshRef.current
      const relevant = (e: LiveEvent) =>
        (stores === "all" || stores.includes(e.store)) &&
        (project === undefined || e.project === undefined || e.project === project)
      if (events.some(relevant)) soon()
    })
    const offResync = live.onResync((at) => {
      if (startedAt.current < at) soon()
    })
    const poll = fresh.pollMs === undefined ? undefined : setInterval(refresh, fresh.pollMs)
    return () => {
      offEvents()
      offResync()
      clearTimeout(timer.current)
      if (poll !== undefined) clearInterval(poll)
      generation.current++
    }
  }, [refresh])

  return { ...state, refresh }
}

/** The live connection's state. */
export const useConnection = (): ConnectionState => {
  const [state, setState] = useState(live.state)
  useEffect(() => live.onState(setState), [])
  return state
}

/** The current time, updated every `everyMs`. */
export const useNow = (everyMs = 1000): number => {
  const [now, setNow] = useState(Date.now())
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs)
    return () => clearInterval(timer)
  }, [everyMs])
  return now
}

/** Ids that live events touched in the last `forMs`, for a moment of highlight. */
export const useRecentlyChanged = (
  idOf: (event: LiveEvent) => ReadonlyArray<string>,
  forMs = 2500,
): ReadonlySet<string> => {
  const [ids, setIds] = useState<ReadonlySet<string>>(new Set())
  const idOfRef = useRef(idOf)
  idOfRef.current = idOf
  useEffect(() => {
    const timers = new Set<ReturnType<typeof setTimeout>>()
    const off = live.onEvents((events) => {
      const touched = events.flatMap((event) => idOfRef.current(event))
      if (touched.length === 0) return
      setIds((previous) => new Set([...previous, ...touched]))
      const timer = setTimeout(() => {
        timers.delete(timer)
        setIds((previous) => {
          const next = new Set(previous)
          for (const id of touched) next.delete(id)
          return next
        })
      }, forMs)
      timers.add(timer)
    })
    return () => {
      off()
      for (const timer of timers) clearTimeout(timer)
    }
  }, [forMs])
  return ids
}

/** `value`, settled for `ms`. */
export const useDebounced = <T>(value: T, ms: number): T => {
  const [settled, setSettled] = useState(value)
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms)
    return () => clearTimeout(timer)
  }, [value, ms])
  return settled
}
