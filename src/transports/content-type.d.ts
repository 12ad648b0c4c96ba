/** content-type 1.x (its last version for Node 20) ships no types: the part MediaType.ts uses, a CommonJS module. */
declare module "content-type" {
  const contentType: {
    /** The media type of a `Content-Type` value (`type` in lower case); throws on one it cannot parse. */
    readonly parse: (header: string) => { readonly type: string; readonly parameters: Record<string, string> }
  }
  export default contentType
}
