/**
 * For the tests of clients that do not read (RequestGate.ts and the transports that use it): the
 * server-sent events a stream carries, and a server side that answers every request it starts.
 */
import type { Readable } from "node:stream"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"

/**
 * Calls `onEvent` with each server-sent event `stream` carries, as it comes: its `event:` name
 * ("message" when it has none) and its data. Comments (a keepalive) are skipped.
 */
export const onSseEvents = (stream: Readable, onEvent: (event: string, data: string) => void): void => {
  let text = ""
  stream.on("data", (chunk: Buffer) => {
    text += chunk.toString("utf8")
    for (let end = text.indexOf("\n\n"); end !== -1; end = text.indexOf("\n\n")) {
      const lines = text.slice(0, end).split("\n")
      text = text.slice(end + 2)
      const data = lines.find((line) => line.startsWith("data: "))
      if (data === undefined) continue
      const event = lines.find((line) => line.startsWith("event: "))?.slice("event: ".length) ?? "message"
      onEvent(event, data.slice("data: ".length))
    }
  })
}

/**
 * Answers every request `transport` starts with `answer` as its result, and gives back the ids
 * started, in the order they started.
 */
export const answerEveryRequest = (
  transport: { onmessage?: (message: JSONRPCMessage) => void; send: (message: JSONRPCMessage) => Promise<void> },
  answer: string,
): Array<number> => {
  const started: Array<number> = []
  transport.onmessage = (message) => {
    const id = (message as { id: number }).id
    started.push(id)
    void transport.send({ jsonrpc: "2.0", id, result: { answer } } as JSONRPCMessage).catch(() => undefined)
  }
  return started
}
