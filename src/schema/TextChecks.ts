/**
 * Schema checks on text shared by every domain's arguments. Each carries a JSON Schema form, so
 * the tool's `inputSchema` shows the limit, and so descriptions annotated after the check reach
 * the JSON Schema too (a check without one swallows them).
 */
import { Schema } from "effect"

/** UTF-8 byte length of `text` (a lone surrogate counts as the 3-byte U+FFFD it encodes to). */
export const utf8ByteLength = (text: string): number => Buffer.byteLength(text, "utf8")

/** At most `maxBytes` UTF-8 bytes. */
export const isMaxUtf8Bytes = (maxBytes: number) =>
  Schema.makeFilter<string>(
    (text) => (utf8ByteLength(text) <= maxBytes ? undefined : `expected at most ${maxBytes} UTF-8 bytes`),
    {
      expected: `a string of at most ${maxBytes} UTF-8 bytes`,
      // JSON Schema counts characters; a string within the byte limit is always within this one.
      toJsonSchema: () => ({ maxLength: maxBytes }),
    },
  )

/** Not empty. */
export const isNonEmpty = Schema.makeFilter<string>(
  (text) => (text.length > 0 ? undefined : "expected a non-empty string"),
  {
    expected: "a non-empty string",
    toJsonSchema: () => ({ minLength: 1 }),
  },
)

const ulidPattern = "^[0-7][0-9A-HJKMNP-TV-Z]{25}$"

/** A canonical ULID: 26 upper-case Crockford base-32 characters, the first 0-7. */
export const isUlid = Schema.makeFilter<string>(
  (text) => (new RegExp(ulidPattern).test(text) ? undefined : "expected a canonical 26-character ULID"),
  { expected: "a canonical 26-character ULID", toJsonSchema: () => ({ pattern: ulidPattern }) },
)
