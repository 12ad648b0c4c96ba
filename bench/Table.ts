/** Shared shapes and helpers of the benchmark suites. */

/** A printed table: a title, a header row and data rows. */
export interface Table {
  readonly title: string
  readonly header: ReadonlyArray<string>
  readonly rows: ReadonlyArray<ReadonlyArray<string | number>>
}

/** What a suite returns: tables to print, notes (target checks) and the JSON to write. */
export interface BenchResult {
  readonly tables: ReadonlyArray<Table>
  readonly notes?: ReadonlyArray<string>
  readonly json: Record<string, unknown>
}

/** A benchmark suite. */
export interface BenchSuite {
  readonly title: string
  readonly run: (options: { readonly quick: boolean }) => Promise<BenchResult>
}

/** Prints a table with aligned columns. */
export const printTable = (table: Table): void => {
  const cells = [table.header, ...table.rows].map((row) => row.map((cell) => String(cell)))
  const widths = table.header.map((_, column) => Math.max(...cells.map((row) => row[column]?.length ?? 0)))
  console.log(`\n${table.title}`)
  cells.forEach((row, index) => {
    console.log(`  ${row.map((cell, column) => cell.padStart(widths[column]!)).join("  ")}`)
    if (index === 0) console.log(`  ${widths.map((width) => "-".repeat(width)).join("  ")}`)
  })
}

/** The q-quantile (0..1) of already sorted numbers. */
export const quantile = (sorted: ReadonlyArray<number>, q: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!

/** Rounds for display. */
export const round = (value: number, digits = 3): number => Number(value.toFixed(digits))
