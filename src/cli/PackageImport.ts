/**
 * `import()` of a package that stays outside the bundle (neovim, web-tree-sitter: loaded on first
 * use). In the built CLI the import is made by the launcher, dist/cli.js, an ES module loaded by
 * Node itself: on Node 20 a function restored from V8's code cache (CodeCache.ts) has lost the
 * callback V8 needs for `import()` ("A dynamic import callback was not specified"), so no
 * `import()` may run from the bundle's own code. Run from sources, or without the launcher, the
 * module imports the package itself.
 */

/** Where the launcher leaves its `import()` for the bundle. */
export const packageImporterKey = Symbol.for("mnemos.importPackage")

type Importer = (specifier: string) => Promise<unknown>

/** Imports the package `specifier` as an ES module of the CLI's own directory would. */
export const importPackage = <Module>(specifier: string): Promise<Module> => {
  const importer = (globalThis as { [packageImporterKey]?: Importer })[packageImporterKey]
  return (importer === undefined ? import(specifier) : importer(specifier)) as Promise<Module>
}
