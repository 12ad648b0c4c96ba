/**
 * Whether an HTTP request's `Content-Type` says JSON, as the MCP SDK's Streamable HTTP transport
 * decides it: the media type's essence (its type and subtype, parameters such as `charset` aside)
 * is `application/json`. Parsed with `content-type` (RFC 7231); a value it cannot parse is read by
 * its part before the first `;`, unless a comma after it shows duplicate headers joined into one.
 */
import contentType from "content-type"

/** The media type's essence (`type/subtype`, lower case), or undefined when none can be read. */
export const mediaTypeEssence = (header: string | undefined): string | undefined => {
  if (header === undefined || header === "") return undefined
  try {
    return contentType.parse(header).type
  } catch {
    const essence = (header.split(";", 1)[0] ?? "").trim().toLowerCase()
    return essence === "" || header.slice(essence.length).includes(",") ? undefined : essence
  }
}

/** Whether `header` (a `Content-Type` value) names JSON. */
export const isJsonContentType = (header: string | undefined): boolean =>
  header === "application/json" || mediaTypeEssence(header) === "application/json"
