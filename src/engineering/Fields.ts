/**
 * Field Schemas shared by the engineering record kinds, with their limits. Byte limits count
 * UTF-8 bytes. The same Schemas check tool arguments and stored data.
 *
 * The lower-case builders (`title("...")`) give the same Schema with a description for tool
 * arguments: a description must be annotated before a custom check to reach the JSON Schema.
 */
import { Schema } from "effect"
import { isMaxUtf8Bytes } from "../graph/Model.ts"

/** Max UTF-8 bytes of a title, name or one-line label: 1 KiB. */
export const titleBytesMax = 1024
/** Max UTF-8 bytes of a free text (description, decision, summary, fix): 64 KiB. */
export const textBytesMax = 64 * 1024
/** Max UTF-8 bytes of a code snippet: 256 KiB. */
export const codeBytesMax = 256 * 1024
/** Max UTF-8 bytes of a file path or location: 4 KiB. */
export const pathBytesMax = 4 * 1024
/** Max items in a list field (files, tags, links, ids): 1,000. */
export const listItemsMax = 1_000
/** Max entries of a key/value map (an environment fingerprint): 200. */
export const mapEntriesMax = 200

const described = (description: string | undefined) =>
  description === undefined ? Schema.String : Schema.String.annotate({ description })
/** A string of at least `minLength` characters and at most `maxBytes` UTF-8 bytes. */
const bounded = (minLength: number, maxBytes: number) => (description?: string) =>
  minLength > 0
    ? described(description).check(Schema.isMinLength(minLength), isMaxUtf8Bytes(maxBytes))
    : described(description).check(isMaxUtf8Bytes(maxBytes))

/** A non-empty one-line text within `titleBytesMax`. */
export const title = bounded(1, titleBytesMax)
export const Title = title()
/** A free text within `textBytesMax`. */
export const text = bounded(0, textBytesMax)
export const Text = text()
/** A non-empty free text within `textBytesMax`. */
export const nonEmptyText = bounded(1, textBytesMax)
export const NonEmptyText = nonEmptyText()
/** Source code within `codeBytesMax`. */
export const code = bounded(1, codeBytesMax)
export const Code = code()
/** A file path (or `path:line`) within `pathBytesMax`. */
export const filePath = bounded(1, pathBytesMax)
export const FilePath = filePath()
/** A record id (a ULID as returned by the tools). */
export const RecordId = Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256))
/** Milliseconds since the epoch. */
export const EpochMillis = Schema.Number.check(Schema.isGreaterThanOrEqualTo(0))

/** A list of at most `listItemsMax` items. */
export const ListOf = <S extends Schema.Top>(item: S) => Schema.Array(item).check(Schema.isMaxLength(listItemsMax))

/** Short labels. */
export const Tags = ListOf(Title)
/** Files a record is about. */
export const Files = ListOf(FilePath)
/** Ids of other records. */
export const RecordIds = ListOf(RecordId)

/** An ISO 8601 date or date-time ("2025-03-01", "2025-03-01T17:00:00Z"). */
export const isoDate = (description?: string) =>
  described(description).check(
    Schema.makeFilter((value: string) =>
      /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value) && !Number.isNaN(Date.parse(value))
        ? undefined
        : "expected an ISO 8601 date such as 2025-03-01 or 2025-03-01T17:00:00Z",
    ),
  )
export const IsoDate = isoDate()

/** A string-to-string map of at most `mapEntriesMax` entries. */
export const StringMap = Schema.Record(Title, Text).check(
  Schema.makeFilter((map: { readonly [key: string]: string }) =>
    Object.keys(map).length <= mapEntriesMax ? undefined : `expected at most ${mapEntriesMax} entries`,
  ),
)

/** One `name=value` entry of a map given as a list (tool arguments stay plain JSON arrays). */
export const mapEntry = (description?: string) =>
  described(description).check(
    Schema.makeFilter((value: string) =>
      /^[^=]{1,256}=/.test(value) && Buffer.byteLength(value) <= textBytesMax
        ? undefined
        : "expected name=value (a name of 1 to 256 characters)",
    ),
  )

/** The map a list of `name=value` entries gives (a later entry wins). */
export const mapOfEntries = (entries: ReadonlyArray<string>): Record<string, string> =>
  Object.fromEntries(entries.map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]))
