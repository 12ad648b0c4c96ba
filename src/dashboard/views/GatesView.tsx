/** Gates: the project's push (and other) safety gates and what `gate verify` would answer now. */
import { api, type Gate, withProject } from "../api.ts"
import { Ago, Badge, Empty, Load, ViewHeader } from "../components.tsx"
import { shortAgent } from "../format.ts"
import { useNow, useRecentlyChanged, useResource } from "../hooks.ts"

const tones: Record<string, string> = { authorized: "ok", blocked: "bad", pending: "warn", expired: "warn" }

const verdictText = (verdict: unknown): string | undefined => {
  if (typeof verdict === "string") return verdict
  if (typeof verdict === "object" && verdict !== null) {
    const record = verdict as Record<string, unknown>
    const text = record.status ?? record.verdict
    if (typeof text === "string") return text
  }
  return undefined
}

export const GatesView = (props: { project: string }) => {
  const { project } = props
  const gates = useResource(() => api<{ gates: ReadonlyArray<Gate> }>(withProject("/api/gates", project)), [project], {
    stores: ["gates"],
    pollMs: 30_000,
  })
  const recent = useRecentlyChanged((event) => (event.store === "gates" && event.record ? [event.record.id] : []))
  const now = useNow(5000)
  return (
    <section class="view gates-view" aria-labelledby="gates-title">
      <ViewHeader title="Gates" subtitle={`What scripts and git wrappers may do in “${project}” (GET /gate/verify).`} />
      <Load resource={gates} what="Gates">
        {(data) =>
          data.gates.length === 0 ? (
            <Empty title="No gates in this namespace" icon="gates">
              Set one with <code>gate_set</code> or <code>mnemos gate set</code>; a git wrapper asks{" "}
              <code>/gate/verify</code> before a push.
            </Empty>
          ) : (
            <table class="table">
              <caption class="visually-hidden">Gates of {project}</caption>
              <thead>
                <tr>
                  <th scope="col">Action</th>
                  <th scope="col">Status</th>
                  <th scope="col">Verdict now</th>
                  <th scope="col">Reason</th>
                  <th scope="col">Expires</th>
                  <th scope="col">Set by</th>
                </tr>
              </thead>
              <tbody>
                {data.gates.map((gate) => {
                  const verdict = verdictText(gate.verdict) ?? gate.status
                  return (
                    <tr key={gate.id} class={recent.has(gate.id) ? "flash" : ""}>
                      <th scope="row">
                        <code>{gate.action}</code>
                      </th>
                      <td>
                        <Badge tone={tones[gate.status]}>{gate.status}</Badge>
                      </td>
                      <td>
                        <Badge tone={tones[verdict]}>{verdict}</Badge>
                      </td>
                      <td>{gate.reason ?? <span class="muted">—</span>}</td>
                      <td>
                        {gate.expiresAt !== undefined ? (
                          <Ago time={gate.expiresAt} now={now} />
                        ) : (
                          <span class="muted">never</span>
                        )}
                      </td>
                      <td>
                        {shortAgent(gate.updatedBy)} · <Ago time={gate.updatedAt} now={now} />
                      </td>
                    </tr>
                  )
                })}
              </tbody>
            </table>
          )
        }
      </Load>
    </section>
  )
}
