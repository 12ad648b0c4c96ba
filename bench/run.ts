/**
 * `npm run bench -- [suite ...] [--quick]`: runs benchmark suites, prints a table per suite and
 * writes `bench/results/<suite>.json` (`<suite>.quick.json` for the quick variant CI runs).
 * Comparisons are measured side by side in the same run, never against remembered numbers.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { cpus, totalmem } from "node:os"
import type { BenchSuite } from "./Table.ts"
import { printTable } from "./Table.ts"

const suites: Record<string, () => Promise<BenchSuite>> = {
  wal: async () => (await import("./wal.ts")).suite,
  graph: async () => (await import("./graph.ts")).suite,
  graphCascade: async () => (await import("./graphCascade.ts")).suite,
  search: async () => (await import("./search.ts")).suite,
  retrieval: async () => (await import("./retrieval.ts")).suite,
  conversations: async () => (await import("./conversations.ts")).suite,
  transports: async () => (await import("./transports.ts")).suite,
  writes: async () => (await import("./writes.ts")).suite,
  unread: async () => (await import("./unread.ts")).suite,
  footprint: async () => (await import("./footprint.ts")).suite,
  cluster: async () => (await import("./cluster.ts")).suite,
}

const args = process.argv.slice(2)
const quick = args.includes("--quick")
const names = args.filter((arg) => !arg.startsWith("--"))
const selected = names.length === 0 ? Object.keys(suites) : names
for (const name of selected) {
  if (!(name in suites)) {
    console.error(`unknown bench suite "${name}"; known: ${Object.keys(suites).join(", ")}`)
    process.exit(2)
  }
}

mkdirSync("bench/results", { recursive: true })
for (const name of selected) {
  const suite = await suites[name]!()
  console.log(`\n== bench ${name}${quick ? " (quick)" : ""}: ${suite.title}`)
  const result = await suite.run({ quick })
  for (const table of result.tables) printTable(table)
  for (const line of result.notes ?? []) console.log(line)
  const file = `bench/results/${name}${quick ? ".quick" : ""}.json`
  const machine = { node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model, memoryBytes: totalmem() }
  writeFileSync(
    file,
    `${JSON.stringify({ suite: name, quick, measuredAt: new Date().toISOString(), machine, ...result.json }, null, 2)}\n`,
  )
  console.log(`wrote ${file}`)
}
