/**
 * Parsers build objects without a prototype (jsonc-parser, smol-toml); deep comparisons of what a
 * file says before and after an edit need plain objects on both sides.
 */

/** A deep copy of a parsed value with plain objects (dates and other instances kept as they are). */
export const plainValue = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(plainValue)
  if (
    typeof value === "object" &&
    value !== null &&
    (Object.getPrototypeOf(value) === null || Object.getPrototypeOf(value) === Object.prototype)
  )
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, plainValue(item)]))
  return value
}
