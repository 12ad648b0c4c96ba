/** `source` (CommonJS) as a module function expression (moduleFunction.mjs). */
export declare const asModuleFunction: (source: string) => string
