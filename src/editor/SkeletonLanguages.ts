/**
 * What a file skeleton shows, per language: which tree-sitter nodes are declarations, what they
 * are called, where their members live, and what counts as exported.
 *
 * Each grammar is an npm package that ships its `.wasm` (built by the grammar's own release, ABI
 * 14 or 15, which `web-tree-sitter` 0.27 loads); nothing is fetched at run time.
 */
import type { Node } from "web-tree-sitter"

/** What a declaration is. */
export type SymbolKind =
  | "function"
  | "method"
  | "class"
  | "interface"
  | "type"
  | "enum"
  | "variable"
  | "constant"
  | "property"
  | "namespace"
  | "module"
  | "struct"
  | "trait"
  | "impl"
  | "macro"

/** A declaration found in a node: its kind and name, and the node holding its members. */
export interface Declaration {
  readonly kind: SymbolKind
  readonly name: string
  /** The node the declaration spans (its line range and signature come from it). */
  readonly node: Node
  /** Where members live (a class body, an impl's declaration list); absent for leaves. */
  readonly members?: Node
  /** The signature ends where this node starts (a function's body); default: the first line. */
  readonly bodyStart?: Node
  /**
   * Rust `pub`, Go's capital letter: set when the declaration itself says; null where the idea
   * does not apply (a Rust `impl` block, a trait's methods).
   */
  readonly exported?: boolean | null
  /** Shown before the signature when the node lacks it (Go's `const` in a grouped declaration). */
  readonly signaturePrefix?: string
}

/** How one language's declarations are found. */
export interface LanguageRules {
  readonly id: SkeletonLanguage
  /** `package/path` of the grammar's wasm, resolved from node_modules. */
  readonly wasm: string
  /**
   * Declarations of a node, or undefined when it declares nothing; `container` is the
   * declaration whose members are being read (undefined at the top level).
   */
  readonly declarations: (node: Node, container: Declaration | undefined) => ReadonlyArray<Declaration> | undefined
  /** Node types walked through at the same level (`export_statement`, decorators, ...). */
  readonly transparent: ReadonlySet<string>
  /** Node types whose declarations are exported (`export_statement`). */
  readonly exporting?: ReadonlySet<string>
  /**
   * For a file, whether a top-level declaration is exported when neither the declaration nor an
   * exporting node says so (`export { a }`, Python's `__all__` or leading underscore).
   */
  readonly exportedNames?: (root: Node) => (name: string) => boolean
}

/** The languages skeletons are made for. */
export const skeletonLanguages = ["typescript", "tsx", "javascript", "python", "rust", "go"] as const
export type SkeletonLanguage = (typeof skeletonLanguages)[number]

const nameOf = (node: Node, field = "name"): string | undefined => node.childForFieldName(field)?.text

const one = (
  kind: SymbolKind,
  node: Node,
  options: { name?: string | undefined; members?: string; body?: string; exported?: boolean | null } = {},
): ReadonlyArray<Declaration> | undefined => {
  const name = options.name ?? nameOf(node)
  if (name === undefined || name === "") return undefined
  const members = options.members === undefined ? undefined : node.childForFieldName(options.members)
  const bodyStart = options.body === undefined ? undefined : node.childForFieldName(options.body)
  return [
    {
      kind,
      name,
      node,
      ...(members != null ? { members } : {}),
      ...(bodyStart != null ? { bodyStart } : {}),
      ...(options.exported !== undefined ? { exported: options.exported } : {}),
    },
  ]
}

const functionValues = new Set(["arrow_function", "function_expression", "function", "generator_function"])

/** `const a = 1, b = () => 2`: one declaration per declarator. */
const variables = (node: Node): ReadonlyArray<Declaration> => {
  const constant = node.type === "lexical_declaration" && node.text.startsWith("const")
  return node.namedChildren
    .filter((child): child is Node => child !== null && child.type === "variable_declarator")
    .flatMap((declarator) => {
      const name = declarator.childForFieldName("name")
      if (name === null || name.type !== "identifier") return []
      const value = declarator.childForFieldName("value")
      const isFunction = value !== null && functionValues.has(value.type)
      const kind: SymbolKind = isFunction ? "function" : constant ? "constant" : "variable"
      return [
        {
          kind,
          name: name.text,
          node,
          ...(isFunction && value.childForFieldName("body") !== null
            ? { bodyStart: value.childForFieldName("body")! }
            : {}),
        },
      ]
    })
}

const ecmaDeclarations = (node: Node, _container: Declaration | undefined): ReadonlyArray<Declaration> | undefined => {
  switch (node.type) {
    case "function_declaration":
    case "generator_function_declaration":
    case "function_signature":
      return one("function", node, { body: "body" })
    case "class_declaration":
    case "abstract_class_declaration":
    case "class":
      return one("class", node, { members: "body", body: "body" })
    case "method_definition":
    case "method_signature":
    case "abstract_method_signature":
      return one("method", node, { body: "body" })
    case "public_field_definition":
    case "property_signature":
      return one("property", node)
    case "field_definition":
      return one("property", node, { name: nameOf(node, "property") })
    case "interface_declaration":
      return one("interface", node, { members: "body", body: "body" })
    case "type_alias_declaration":
      return one("type", node)
    case "enum_declaration":
      return one("enum", node, { body: "body" })
    case "internal_module":
      return one("namespace", node, { members: "body", body: "body" })
    case "module":
      return one("module", node, { members: "body", body: "body" })
    case "lexical_declaration":
    case "variable_declaration":
      return variables(node)
    default:
      return undefined
  }
}

const ecmaTransparent = new Set(["export_statement", "expression_statement", "ambient_declaration"])
const ecmaExporting = new Set(["export_statement"])

/** Names exported by `export { a, b as c }` clauses at the top level. */
const ecmaExportClauses = (root: Node) => {
  const names = new Set<string>()
  for (const statement of root.namedChildren) {
    if (statement?.type !== "export_statement" || statement.childForFieldName("source") !== null) continue
    for (const clause of statement.namedChildren) {
      if (clause?.type !== "export_clause") continue
      for (const specifier of clause.namedChildren) {
        const name = specifier === null ? undefined : nameOf(specifier)
        if (name !== undefined) names.add(name)
      }
    }
  }
  return (name: string) => names.has(name)
}

/** Names in `__all__ = [...]`, or undefined when the module does not define it. */
const pythonAll = (root: Node): ReadonlySet<string> | undefined => {
  for (const statement of root.namedChildren) {
    const assignment = statement?.type === "expression_statement" ? statement.namedChildren[0] : undefined
    if (assignment?.type !== "assignment" || nameOf(assignment, "left") !== "__all__") continue
    const names = (assignment.childForFieldName("right")?.namedChildren ?? [])
      .filter((item): item is Node => item !== null && item.type === "string")
      .map((item) => item.text.replace(/^[rbuf]*["']+|["']+$/gi, ""))
    return new Set(names)
  }
  return undefined
}

const pythonDeclarations = (node: Node, container: Declaration | undefined): ReadonlyArray<Declaration> | undefined => {
  switch (node.type) {
    case "function_definition":
      return one(container?.kind === "class" ? "method" : "function", node, { body: "body" })
    case "class_definition":
      return one("class", node, { members: "body", body: "body" })
    case "expression_statement": {
      const assignment = node.namedChildren[0]
      if (assignment?.type !== "assignment") return undefined
      const left = assignment.childForFieldName("left")
      if (left?.type !== "identifier") return undefined
      const kind: SymbolKind =
        container?.kind === "class" ? "property" : /^[A-Z][A-Z0-9_]*$/.test(left.text) ? "constant" : "variable"
      return one(kind, node, { name: left.text })
    }
    default:
      return undefined
  }
}

const isPub = (node: Node) => node.namedChildren.some((child) => child?.type === "visibility_modifier")

const rustDeclarations = (node: Node, container: Declaration | undefined): ReadonlyArray<Declaration> | undefined => {
  const exported = isPub(node)
  switch (node.type) {
    case "function_item":
    case "function_signature_item": {
      if (container?.kind === "trait") return one("method", node, { body: "body", exported: null })
      if (container?.kind !== "impl") return one("function", node, { body: "body", exported })
      // A trait implementation's methods are as visible as the trait; `pub` says nothing there.
      const ofTrait = container.node.childForFieldName("trait") !== null
      return one("method", node, { body: "body", exported: ofTrait ? null : exported })
    }
    case "struct_item":
    case "union_item":
      return one("struct", node, { body: "body", exported })
    case "enum_item":
      return one("enum", node, { body: "body", exported })
    case "trait_item":
      return one("trait", node, { members: "body", body: "body", exported })
    case "impl_item": {
      const type = nameOf(node, "type")
      const trait = nameOf(node, "trait")
      return one("impl", node, {
        name: type === undefined ? undefined : trait === undefined ? type : `${trait} for ${type}`,
        members: "body",
        body: "body",
        exported: null,
      })
    }
    case "mod_item":
      return one("module", node, { members: "body", body: "body", exported })
    case "const_item":
    case "static_item":
      return one("constant", node, { exported })
    case "type_item":
      return one("type", node, { exported })
    case "macro_definition":
      return one("macro", node, { exported: false })
    default:
      return undefined
  }
}

const goExported = (name: string) => /^\p{Lu}/u.test(name)

const goSpecs = (node: Node, kind: SymbolKind, keyword: string): ReadonlyArray<Declaration> =>
  node.namedChildren
    .filter((spec): spec is Node => spec !== null && (spec.type === "const_spec" || spec.type === "var_spec"))
    .flatMap((spec) =>
      spec.childrenForFieldName("name").map((name) => ({
        kind,
        name: name.text,
        node: spec,
        exported: goExported(name.text),
        signaturePrefix: `${keyword} `,
      })),
    )

const goDeclarations = (node: Node, _container: Declaration | undefined): ReadonlyArray<Declaration> | undefined => {
  switch (node.type) {
    case "function_declaration":
      return one("function", node, { body: "body", exported: goExported(nameOf(node) ?? "") })
    case "method_declaration":
      return one("method", node, { body: "body", exported: goExported(nameOf(node) ?? "") })
    case "type_spec": {
      const type = node.childForFieldName("type")?.type
      const kind: SymbolKind = type === "struct_type" ? "struct" : type === "interface_type" ? "interface" : "type"
      const declarations = one(kind, node, { exported: goExported(nameOf(node) ?? "") })
      return declarations?.map((declaration) => ({ ...declaration, signaturePrefix: "type " }))
    }
    case "const_declaration":
      return goSpecs(node, "constant", "const")
    case "var_declaration":
      return goSpecs(node, "variable", "var")
    default:
      return undefined
  }
}

/** The rules of each language. */
export const languageRules: Record<SkeletonLanguage, LanguageRules> = {
  typescript: {
    id: "typescript",
    wasm: "tree-sitter-typescript/tree-sitter-typescript.wasm",
    declarations: ecmaDeclarations,
    transparent: ecmaTransparent,
    exporting: ecmaExporting,
    exportedNames: ecmaExportClauses,
  },
  tsx: {
    id: "tsx",
    wasm: "tree-sitter-typescript/tree-sitter-tsx.wasm",
    declarations: ecmaDeclarations,
    transparent: ecmaTransparent,
    exporting: ecmaExporting,
    exportedNames: ecmaExportClauses,
  },
  javascript: {
    id: "javascript",
    wasm: "tree-sitter-javascript/tree-sitter-javascript.wasm",
    declarations: ecmaDeclarations,
    transparent: ecmaTransparent,
    exporting: ecmaExporting,
    exportedNames: ecmaExportClauses,
  },
  python: {
    id: "python",
    wasm: "tree-sitter-python/tree-sitter-python.wasm",
    declarations: pythonDeclarations,
    transparent: new Set(["decorated_definition"]),
    exportedNames: (root) => {
      const all = pythonAll(root)
      return all === undefined ? (name) => !name.startsWith("_") : (name) => all.has(name)
    },
  },
  rust: {
    id: "rust",
    wasm: "tree-sitter-rust/tree-sitter-rust.wasm",
    declarations: rustDeclarations,
    transparent: new Set(),
  },
  go: {
    id: "go",
    wasm: "tree-sitter-go/tree-sitter-go.wasm",
    declarations: goDeclarations,
    transparent: new Set(["type_declaration"]),
  },
}

const extensions: Record<string, SkeletonLanguage> = {
  ".ts": "typescript",
  ".mts": "typescript",
  ".cts": "typescript",
  ".tsx": "tsx",
  ".js": "javascript",
  ".mjs": "javascript",
  ".cjs": "javascript",
  ".jsx": "javascript",
  ".py": "python",
  ".pyi": "python",
  ".rs": "rust",
  ".go": "go",
}

/** The language of a file, from its extension. */
export const languageOfPath = (path: string): SkeletonLanguage | undefined => {
  const dot = path.lastIndexOf(".")
  return dot < 0 ? undefined : extensions[path.slice(dot).toLowerCase()]
}
