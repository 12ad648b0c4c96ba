/** Notes: sticky notes, handoffs between agents, and session summaries of the project. */
import { api, type Handoff, type NotesData, type SessionSummaryNote, type StickyNote, withProject } from "../api.ts"
import { Ago, Badge, Empty, Load, ViewHeader } from "../components.tsx"
import { shortAgent } from "../format.ts"
import { useNow, useRecentlyChanged, useResource } from "../hooks.ts"

const stickyColors: Record<string, string> = {
  yellow: "sticky-yellow",
  pink: "sticky-pink",
  blue: "sticky-blue",
  green: "sticky-green",
  orange: "sticky-orange",
  purple: "sticky-purple",
}

export const NotesView = (props: { project: string }) => {
  const { project } = props
  const notes = useResource(() => api<NotesData>(withProject("/api/notes", project)), [project], {
    stores: ["notes"],
    project,
  })
  const recent = useRecentlyChanged((event) => (event.store === "notes" && event.record ? [event.record.id] : []))
  const now = useNow(10_000)
  return (
    <section class="view notes-view" aria-labelledby="notes-title">
      <ViewHeader title="Notes" subtitle={`What agents left for each other in “${project}”.`} />
      <Load resource={notes} what="Notes">
        {(data) => (
          <div class="notes-grid">
            <section aria-labelledby="sticky-title" class="notes-section">
              <h2 id="sticky-title">
                Sticky notes <span class="count">{data.notes?.length ?? 0}</span>
              </h2>
              {data.notes === null ? (
                <p class="muted">Not available yet.</p>
              ) : data.notes.length === 0 ? (
                <Empty title="No sticky notes" icon="notes">
                  Agents pin reminders with <code>add_sticky_note</code>.
                </Empty>
              ) : (
                <ul class="stickies">
                  {data.notes.map((note) => (
                    <Sticky key={note.id} note={note} now={now} flash={recent.has(note.id)} />
                  ))}
                </ul>
              )}
            </section>
            <section aria-labelledby="handoffs-title" class="notes-section">
              <h2 id="handoffs-title">
                Handoffs <span class="count">{data.handoffs?.length ?? 0}</span>
              </h2>
              {data.handoffs === null ? (
                <p class="muted">Not available yet.</p>
              ) : data.handoffs.length === 0 ? (
                <Empty title="No handoffs" icon="handoff">
                  An agent hands work over with <code>add_handoff</code>.
                </Empty>
              ) : (
                <ul class="handoffs">
                  {data.handoffs.map((handoff) => (
                    <HandoffItem key={handoff.id} handoff={handoff} now={now} flash={recent.has(handoff.id)} />
                  ))}
                </ul>
              )}
            </section>
            <section aria-labelledby="summaries-title" class="notes-section">
              <h2 id="summaries-title">
                Session summaries <span class="count">{data.summaries?.length ?? 0}</span>
              </h2>
              {data.summaries === null ? (
                <p class="muted">Not available yet.</p>
              ) : data.summaries.length === 0 ? (
                <Empty title="No session summaries" icon="summary">
                  Agents close a session with <code>add_session_summary</code>.
                </Empty>
              ) : (
                <ul class="summaries">
                  {data.summaries.map((summary) => (
                    <SummaryItem key={summary.id} summary={summary} now={now} flash={recent.has(summary.id)} />
                  ))}
                </ul>
              )}
            </section>
          </div>
        )}
      </Load>
    </section>
  )
}

const Sticky = (props: { note: StickyNote; now: number; flash: boolean }) => {
  const { note } = props
  return (
    <li class={`sticky ${stickyColors[note.color ?? ""] ?? "sticky-yellow"} ${props.flash ? "flash" : ""}`}>
      <p class="sticky-text">{note.text}</p>
      <p class="sticky-foot">
        {note.tags?.map((tag) => (
          <span key={tag} class="tag">
            #{tag}
          </span>
        ))}
        <span class="who">
          {shortAgent(note.createdBy)} · <Ago time={note.createdAt} now={props.now} />
        </span>
        {note.expiresAt !== undefined && (
          <span class="expires">
            expires <Ago time={note.expiresAt} now={props.now} />
          </span>
        )}
      </p>
    </li>
  )
}

const HandoffItem = (props: { handoff: Handoff; now: number; flash: boolean }) => {
  const { handoff } = props
  return (
    <li class={`handoff ${props.flash ? "flash" : ""}`}>
      <p class="handoff-route">
        <strong>{handoff.fromAgent}</strong> <span aria-hidden="true">→</span>
        <span class="visually-hidden">to</span> <strong>{handoff.toAgent}</strong>
        <Badge tone={handoff.status === "open" ? "warn" : "ok"}>{handoff.status}</Badge>
        <Ago time={handoff.createdAt} now={props.now} />
      </p>
      <p class="handoff-summary">{handoff.summary}</p>
      {handoff.context !== undefined && <p class="muted">{handoff.context}</p>}
      {(handoff.files?.length ?? 0) > 0 && (
        <p class="files">
          {handoff.files!.map((file) => (
            <code key={file}>{file}</code>
          ))}
        </p>
      )}
      {handoff.acknowledgedBy !== undefined && (
        <p class="muted small">
          acknowledged by {handoff.acknowledgedBy} <Ago time={handoff.acknowledgedAt} now={props.now} />
        </p>
      )}
    </li>
  )
}

const SummaryItem = (props: { summary: SessionSummaryNote; now: number; flash: boolean }) => {
  const { summary } = props
  return (
    <li class={`summary ${props.flash ? "flash" : ""}`}>
      <p class="summary-head">
        <strong>{summary.agent ?? shortAgent(summary.createdBy)}</strong>
        {summary.sessionId !== undefined && <code class="muted">{summary.sessionId}</code>}
        <Ago time={summary.createdAt} now={props.now} />
      </p>
      <p>{summary.summary}</p>
      {(summary.highlights?.length ?? 0) > 0 && (
        <>
          <h3>Highlights</h3>
          <ul class="bullets">
            {summary.highlights!.map((item, index) => (
              <li key={index}>{item}</li>
            ))}
          </ul>
        </>
      )}
      {(summary.nextSteps?.length ?? 0) > 0 && (
        <>
          <h3>Next steps</h3>
          <ul class="bullets">
            {summary.nextSteps!.map((item, index) => (
              <li key={index}>{item}</li>
            ))}
          </ul>
        </>
      )}
    </li>
  )
}
