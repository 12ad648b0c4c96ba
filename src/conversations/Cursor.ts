/**
 * The opaque cursors of read_messages: base64url of a small versioned JSON object naming the view
 * and the last item returned. A cursor is only a position, so it stays valid across writes: the
 * next page starts after that item, whatever was written or deleted meanwhile.
 */
import { Result, Schema } from "effect"
import { Ulid } from "./Model.ts"

/** Max UTF-8 bytes of a cursor argument: 2 KiB. */
export const cursorBytesMax = 2048

const HistoryCursor = Schema.Struct({
  v: Schema.Literal(1),
  view: Schema.Literal("history"),
  session_id: Schema.String,
  after: Ulid,
})
const SessionsCursor = Schema.Struct({ v: Schema.Literal(1), view: Schema.Literal("sessions"), after: Schema.String })

/** What a cursor says. */
export const Cursor = Schema.Union([HistoryCursor, SessionsCursor])
export type Cursor = typeof Cursor.Type

const decodeCursorJson = Schema.decodeUnknownResult(Schema.fromJsonString(Cursor))

/** The cursor's text. */
export const encodeCursor = (cursor: Cursor): string =>
  Buffer.from(JSON.stringify(cursor), "utf8").toString("base64url")

/** Reads a cursor; the failure says why it is not one. */
export const decodeCursor = (text: string): Result.Result<Cursor, string> => {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return Result.fail("cursor is not a cursor returned by read_messages")
  return Result.mapError(
    decodeCursorJson(Buffer.from(text, "base64url").toString("utf8")),
    () => "cursor is not a cursor returned by read_messages",
  )
}

/** The message a history cursor of `session` points after; the failure says why it does not fit. */
export const historyCursorAfter = (text: string, session: string): Result.Result<string, string> =>
  Result.flatMap(decodeCursor(text), (cursor) =>
    cursor.view === "history" && cursor.session_id === session
      ? Result.succeed(cursor.after)
      : Result.fail("cursor does not belong to this session's history"),
  )

/** The position a sessions cursor points after. */
export const sessionsCursorAfter = (text: string): Result.Result<string, string> =>
  Result.flatMap(decodeCursor(text), (cursor) =>
    cursor.view === "sessions"
      ? Result.succeed(cursor.after)
      : Result.fail("cursor does not belong to the sessions view"),
  )
