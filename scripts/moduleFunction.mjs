// The bundled CLI's shape (scripts/bundle.mjs; src/cli/CodeCache.ts runs it): a CommonJS module's
// text as one expression whose value is the module's function, `(exports, require, module,
// __filename, __dirname) => ...`, the wrapper Node's own loader puts around a module. With the
// wrapper in the file, the launcher hands V8 the file's text as it was read; wrapped at run time,
// the 2.4 MB text was concatenated and V8 copied it again into one string before compiling it
// (one more copy of the bundle's pages in every start). Loaded by Node's loader instead (`require`,
// as a run with source maps on does), the same file runs the module at once: there, `this` at its
// top level is the module's `exports`, where a script's is the global object.
//
// The wrapper's head goes on the text's first line, its tail on a line after the last: every other
// line keeps its number, so the source map still holds.

/** `source` (CommonJS) as a module function expression. */
export const asModuleFunction = (source) =>
  "(function (main) { return this === globalThis ? main : main(exports, require, module, __filename, __dirname) })" +
  `.call(this, function (exports, require, module, __filename, __dirname) {${source}\n})`
