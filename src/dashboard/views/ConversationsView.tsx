/** Conversations: the project's sessions, newest activity first; pick one to read its messages. */
import { useEffect, useRef, useState } from "preact/hooks"
import { api, type ConversationMessage, type ConversationSession, withProject } from "../api.ts"
import { Ago, Badge, Empty, Load, ViewHeader } from "../components.tsx"
import { formatCount } from "../format.ts"
import { useNow, useResource } from "../hooks.ts"

export const ConversationsView = (props: { project: string }) => {
  const { project } = props
  const sessions = useResource(
    () => api<{ sessions: ReadonlyArray<ConversationSession> }>(withProject("/api/conversations/sessions", project)),
    [project],
    { stores: ["conversations"], project },
  )
  const [chosen, setChosen] = useState<string | undefined>(undefined)
  const now = useNow(10_000)
  const ordered = [...(sessions.data?.sessions ?? [])].sort((a, b) => b.last_message_at - a.last_message_at)
  const current = chosen ?? ordered[0]?.session_id
  return (
    <section class="view conversations-view" aria-labelledby="conversations-title">
      <ViewHeader title="Conversations" subtitle={`Sessions of “${project}” and what was said in them.`} />
      <Load resource={sessions} what="Conversations">
        {() =>
          ordered.length === 0 ? (
            <Empty title="No conversations yet" icon="conversations">
              Agents store messages with <code>write_message</code>; sessions appear here as they start.
            </Empty>
          ) : (
            <div class="split">
              <nav class="session-list" aria-label="Sessions">
                <ul>
                  {ordered.map((session) => (
                    <li key={session.session_id}>
                      <button
                        type="button"
                        class="session"
                        aria-current={session.session_id === current ? "true" : undefined}
                        onClick={() => setChosen(session.session_id)}
                      >
                        <span class="session-id">{session.session_id}</span>
                        <span class="session-summary">{session.representative_summary}</span>
                        <span class="session-meta">
                          {formatCount(session.message_count)} messages ·{" "}
                          <Ago time={session.last_message_at} now={now} />
                        </span>
                      </button>
                    </li>
                  ))}
                </ul>
              </nav>
              {current !== undefined && <Messages project={project} session={current} now={now} />}
            </div>
          )
        }
      </Load>
    </section>
  )
}

const Messages = (props: { project: string; session: string; now: number }) => {
  const messages = useResource(
    () =>
      api<{ history: ReadonlyArray<ConversationMessage>; nextCursor?: string }>(
        withProject(`/api/conversations/${encodeURIComponent(props.session)}/messages`, props.project),
      ),
    [props.project, props.session],
    { stores: ["conversations"], project: props.project },
  )
  const end = useRef<HTMLDivElement>(null)
  const count = messages.data?.history.length ?? 0
  useEffect(() => end.current?.scrollIntoView({ block: "end" }), [count, props.session])
  return (
    <section class="messages" aria-label={`Messages of session ${props.session}`}>
      <h2 class="messages-title">{props.session}</h2>
      <Load resource={messages} what="Messages">
        {(data) =>
          data.history.length === 0 ? (
            <Empty title="No messages in this session" />
          ) : (
            <ol class="message-list">
              {data.history.map((message) => (
                <li key={message.message_id} class={`message role-${message.role}`}>
                  <p class="message-head">
                    <strong>{message.role}</strong>
                    {message.metadata.memory_kind !== "conversation" && <Badge>{message.metadata.memory_kind}</Badge>}
                    {message.metadata.tags.map((tag) => (
                      <span key={tag} class="tag">
                        #{tag}
                      </span>
                    ))}
                    <Ago time={message.timestamp} now={props.now} />
                  </p>
                  <p class="message-content">{message.content}</p>
                </li>
              ))}
              {data.nextCursor !== undefined && <li class="muted small">Only the first page is shown.</li>}
            </ol>
          )
        }
      </Load>
      <div ref={end} />
    </section>
  )
}
