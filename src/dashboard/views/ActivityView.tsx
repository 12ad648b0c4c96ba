/**
 * Activity: the audit ledger as a live feed — who changed what, when, through which tool.
 * New entries slide in at the top as agents write; older pages load on demand.
 */
import { useState } from "preact/hooks"
import { type AuditEntry, api } from "../api.ts"
import { Ago, Badge, Empty, Load, ViewHeader } from "../components.tsx"
import { colorOf, shortAgent } from "../format.ts"
import { useNow, useResource } from "../hooks.ts"

interface AuditPage {
  readonly entries: ReadonlyArray<AuditEntry>
  readonly nextCursor?: number
}

const actionTone = (action: string) =>
  /delet|remov|purg/i.test(action)
    ? "bad"
    : /creat|add|writ|append/i.test(action)
      ? "ok"
      : /gap/i.test(action)
        ? "warn"
        : ""

export const ActivityView = (props: { project: string }) => {
  const [scope, setScope] = useState<"all" | "project">("all")
  const [store, setStore] = useState("")
  const project = scope === "all" ? "*" : props.project
  const query = new URLSearchParams({ project, ...(store !== "" ? { store } : {}) })
  const feed = useResource(() => api<AuditPage>(`/api/audit?${query.toString()}`), [project, store], {
    stores: ["audit"],
  })
  const [older, setOlder] = useState<{ key: string; entries: ReadonlyArray<AuditEntry>; cursor?: number }>({
    key: "",
    entries: [],
  })
  const key = query.toString()
  const olderEntries = older.key === key ? older.entries : []
  const cursor = older.key === key && older.entries.length > 0 ? older.cursor : feed.data?.nextCursor
  const now = useNow(5000)
  const loadOlder = async () => {
    if (cursor === undefined) return
    const page = await api<AuditPage>(`/api/audit?${query.toString()}&cursor=${cursor}`)
    setOlder({
      key,
      entries: [...olderEntries, ...page.entries],
      ...(page.nextCursor !== undefined ? { cursor: page.nextCursor } : {}),
    })
  }
  const stores = [...new Set((feed.data?.entries ?? []).map((entry) => entry.store))].sort()

  return (
    <section class="view activity-view" aria-labelledby="activity-title">
      <ViewHeader title="Activity" subtitle="Every change by every agent, newest first, as it happens.">
        <fieldset class="segmented">
          <legend class="visually-hidden">Which projects</legend>
          <button type="button" aria-pressed={scope === "all"} onClick={() => setScope("all")}>
            All projects
          </button>
          <button type="button" aria-pressed={scope === "project"} onClick={() => setScope("project")}>
            {props.project}
          </button>
        </fieldset>
        <label class="inline-select">
          <span>Store</span>
          <select value={store} onChange={(event) => setStore(event.currentTarget.value)}>
            <option value="">all</option>
            {[...new Set([...stores, ...(store !== "" ? [store] : [])])].map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
      </ViewHeader>
      <Load resource={feed} what="Activity">
        {(data) =>
          data.entries.length === 0 ? (
            <Empty title="Nothing has happened yet" icon="activity">
              Every write by any agent shows up here within a second.
            </Empty>
          ) : (
            <>
              <ol class="feed" aria-live="polite" aria-relevant="additions" data-testid="activity-feed">
                {[...data.entries, ...olderEntries].map((entry) => (
                  <li key={entry.seq} class="feed-item">
                    <span class="feed-dot" style={{ background: colorOf(entry.store) }} aria-hidden="true" />
                    <div class="feed-main">
                      <p class="feed-line">
                        {entry.who === "unknown" || entry.who === "" ? (
                          <span class="feed-who muted" title="the writer is not recorded for this store">
                            an agent
                          </span>
                        ) : (
                          <strong class="feed-who" title={entry.who}>
                            {shortAgent(entry.who)}
                          </strong>
                        )}
                        <Badge tone={actionTone(entry.action)}>{entry.action}</Badge>
                        <span class="feed-summary">{entry.summary}</span>
                      </p>
                      <p class="feed-meta">
                        <span>{entry.store}</span>
                        {entry.tool !== "" && <code>{entry.tool}</code>}
                        {entry.project !== "*" && <span>{entry.project}</span>}
                        <Ago time={entry.at} now={now} />
                      </p>
                    </div>
                  </li>
                ))}
              </ol>
              {cursor !== undefined && (
                <button type="button" class="button load-more" onClick={() => void loadOlder()}>
                  Load older
                </button>
              )}
            </>
          )
        }
      </Load>
    </section>
  )
}
