/**
 * The gate routes' HTTP shapes (`/gate/verify`, `/gate/set`, `/gate/list`, for git wrappers and
 * CI): their query and body Schemas, and how failures map to HTTP statuses. The operations
 * themselves live in Gates.ts.
 */
import { Schema } from "effect"
import { StoreError } from "../stores/StoreError.ts"
import { Title } from "./Fields.ts"
import { GateSetInput } from "./Gates.ts"
import type { RecordRejected } from "./RecordStore.ts"

/** Longest client identity a REST caller may give in `x-mnemos-client`. */
export const restClientLengthMax = 256

/** `GET /gate/verify` query parameters. */
export const GateVerifyQuery = Schema.Struct({
  action: Title,
  namespace: Schema.optionalKey(Title),
  consume: Schema.optionalKey(Schema.Literals(["1", "0", "true", "false"])),
})

/** `POST /gate/set` body: `gate_set`'s arguments, the namespace included. */
export const GateSetBody = GateSetInput

/** The HTTP status of a failed operation. */
export const httpStatusOf = (error: RecordRejected | StoreError): number =>
  error instanceof StoreError ? 503 : error.reason === "NotFound" ? 404 : error.reason === "Conflict" ? 409 : 400
