/**
 * A full disk under a real daemon: the stores' directory is a small tmpfs (mounted in a private
 * mount namespace with `unshare`, so no privileges are needed where user namespaces are allowed),
 * partly taken by a ballast file. Writes fill it until LMDB and the log have no room; the daemon
 * must stay up, refuse writes with an error naming the full disk, keep serving reads (every
 * acknowledged write among them), say `degraded` in its health, and take writes again by itself
 * once the ballast is removed (docs/durability.md, "A full disk").
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { StoreHealth } from "../../src/actors/StoreActor.ts"
import {
  apiGet,
  authHeaders,
  callTool,
  cleanup,
  connectClient,
  type DaemonProcess,
  runCli,
  sleep,
  startDaemon,
  tempDir,
  waitFor,
} from "../transports/harness.ts"

/** The tmpfs under the stores, and the part of it the ballast takes. */
const storesTmpfsBytes = 48 * 1024 * 1024
/** Freed, it leaves room for every store to start a new log segment (4 MiB each) and still resume. */
const ballastBytes = 16 * 1024 * 1024
/** One write: an entity with three observations of 60 kB (each under the 64 KiB limit). */
const observationBytes = 60_000

/**
 * Mounts a tmpfs on each directory of MNEMOS_TEST_MOUNTS with a ballast in it, and on each of MNEMOS_TEST_FILL filled
 * whole; removes the ballasts once the flag exists; then
 * runs the daemon (the arguments after the script), in the same private mount namespace.
 */
const mountScript = `
set -e
for dir in $MNEMOS_TEST_MOUNTS; do
  mkdir -p "$dir"
  mount -t tmpfs -o size=${storesTmpfsBytes} tmpfs "$dir"
  head -c ${ballastBytes} /dev/zero > "$dir/ballast"
done
for dir in $MNEMOS_TEST_FILL; do
  mkdir -p "$dir"
  mount -t tmpfs -o size=${storesTmpfsBytes} tmpfs "$dir"
  head -c ${storesTmpfsBytes} /dev/zero > "$dir/ballast" 2>/dev/null || true
done
( while [ ! -e "$MNEMOS_TEST_FREE" ]; do sleep 0.1; done; for dir in $MNEMOS_TEST_MOUNTS $MNEMOS_TEST_FILL; do rm -f "$dir/ballast"; done ) &
exec "$@"
`

/**
 * A daemon whose data directory's `mounts` are small tmpfs with a ballast and `filled` are small
 * tmpfs filled whole (in a private mount namespace); the ballasts go once `freeFlag` exists.
 */
const startOnSmallDisks = async (
  prefix: string,
  disks: { readonly mounts?: ReadonlyArray<string>; readonly filled?: ReadonlyArray<string> },
) => {
  const dataDir = tempDir(prefix)
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const freeFlag = join(dataDir, "free-the-ballast")
  const paths = (dirs: ReadonlyArray<string> = []) => dirs.map((dir) => join(dataDir, dir)).join(" ")
  // The built CLI, as users run it: the full disk's handling is what ships.
  const daemon = await startDaemon({
    built: true,
    dataDir,
    through: ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mountScript, "sh"],
    env: { MNEMOS_TEST_MOUNTS: paths(disks.mounts), MNEMOS_TEST_FILL: paths(disks.filled), MNEMOS_TEST_FREE: freeFlag },
  })
  const client = await connectClient("streamable-http", daemon.url, { headers: authHeaders(dataDir) })
  return { dataDir, freeFlag, daemon, client }
}

const graphHealth = async (daemon: DaemonProcess): Promise<StoreHealth> => {
  const stats = await apiGet<{ stores: ReadonlyArray<StoreHealth> }>(daemon, "/api/stats")
  return stats.stores.find((store) => store.name === "graph")!
}

/**
 * Removes the ballast, then writes "after-space-returned" until a write is taken (at most 30 s):
 * writes resume without a restart by hand. The last refusal is said when none is taken.
 */
const freeAndWriteAgain = async (client: Client, freeFlag: string) => {
  writeFileSync(freeFlag, "")
  let lastRefusal = ""
  return waitFor(
    "a write after the ballast is gone",
    async () => {
      const result = await callTool(client, "create_entities", {
        entities: [{ name: "after-space-returned", entityType: "t", observations: ["small"] }],
      })
      if (result.isError) lastRefusal = result.text
      return result.isError ? undefined : result
    },
    30_000,
  ).catch((error: Error) => {
    throw new Error(`${error.message}; the last refusal: ${lastRefusal}`)
  })
}

/**
 * LMDB never started a write the disk had no room for (src/stores/checkpoint/LmdbRoom.ts): its
 * failed page writes print "Write error" and corrupt lmdb-js's heap, which ends the daemon later.
 */
const assertLmdbNeverMetTheFullDisk = (daemon: DaemonProcess) =>
  assert.notMatch(daemon.output(), /Write error|Attempting to write page/, "LMDB met the full disk")

afterAll(cleanup)

describe("a full disk under the daemon", () => {
  it("refuses writes with a clear error, keeps serving reads and every acknowledged write, says degraded, and writes again by itself once space returns", async () => {
    const { dataDir, freeFlag, daemon, client } = await startOnSmallDisks("mnemos-full-disk-", { mounts: ["stores"] })
    const observation = (name: string, part: string) => `${part}${name}`.padEnd(observationBytes, "x")
    const acknowledged: Array<string> = []
    let refusal: string | undefined
    for (let index = 0; index < 400 && refusal === undefined; index++) {
      const name = `entity-${index}`
      const result = await callTool(
        client,
        "create_entities",
        {
          entities: [
            {
              name,
              entityType: "filler",
              observations: ["a", "b", "c"].map((part) => observation(name, part)),
            },
          ],
        },
        30_000,
      ).catch((error: Error) => {
        throw new Error(
          `write ${index} got no answer (${error.message}); the daemon said:\n${daemon.output().slice(-4000)}`,
        )
      })
      if (result.isError) refusal = result.text
      else acknowledged.push(name)
    }
    assert.isDefined(refusal, `${acknowledged.length} writes of 180 kB fit on a ${storesTmpfsBytes >> 20} MiB disk`)
    assert.include(refusal!, "is full")
    assert.include(refusal!, "writes resume by themselves once space is freed")
    assert.isAbove(acknowledged.length, 10)
    assert.isNull((await Promise.race([daemon.exited, sleep(500)])) ?? null, "the daemon is still running")

    // Writes are refused at once; reads serve every acknowledged write.
    const again = await callTool(client, "create_entities", {
      entities: [{ name: "while-full", entityType: "t", observations: ["x"] }],
    })
    assert.isTrue(again.isError)
    assert.include(again.text, "is full")
    const read = await callTool(client, "open_nodes", { names: acknowledged })
    assert.isFalse(read.isError, read.text)
    const entities = (read.structured as { entities: ReadonlyArray<{ name: string }> }).entities
    assert.deepStrictEqual(
      entities.map((entity) => entity.name),
      acknowledged,
    )
    assert.strictEqual((await graphHealth(daemon)).state, "degraded")
    const health = await runCli(["health", "--data-dir", dataDir], 120_000)
    assert.include(health.output, "degraded")
    assert.include(health.output, "disk full")

    // Space returns: writes resume without a restart by hand.
    const resumed = await freeAndWriteAgain(client, freeFlag)
    assert.isFalse(resumed.isError)
    assert.strictEqual((await graphHealth(daemon)).state, "running")
    assert.isTrue(existsSync(freeFlag))
    assert.isNull((await Promise.race([daemon.exited, sleep(100)])) ?? null, "the daemon is still running")
    assertLmdbNeverMetTheFullDisk(daemon)
    await daemon.stop()
  })

  it("eight writers at once: writes are refused only once not one batch has room in LMDB, and resume once space returns", async () => {
    // Batches of eight writes of 180 kB wait for LMDB together, up to 16 MiB of them (StoreActor.ts):
    // a transaction of them all can need more room than the disk has, or gets back, while each
    // batch alone fits. The store must commit what fits (CommitQueue.ts), not refuse every write.
    const { freeFlag, daemon, client } = await startOnSmallDisks("mnemos-full-disk-together-", { mounts: ["stores"] })
    const observation = (name: string, part: string) => `${part}${name}`.padEnd(observationBytes, "x")
    const acknowledged: Array<string> = []
    let refusal: string | undefined
    for (let round = 0; round < 100 && refusal === undefined; round++) {
      const names = Array.from({ length: 8 }, (_, index) => `together-${round}-${index}`)
      const results = await Promise.all(
        names.map((name) =>
          callTool(
            client,
            "create_entities",
            {
              entities: [
                { name, entityType: "filler", observations: ["a", "b", "c"].map((part) => observation(name, part)) },
              ],
            },
            30_000,
          ),
        ),
      )
      results.forEach((result, index) => {
        if (result.isError) refusal = result.text
        else acknowledged.push(names[index]!)
      })
    }
    assert.isDefined(refusal, `${acknowledged.length} writes of 180 kB fit on a ${storesTmpfsBytes >> 20} MiB disk`)
    assert.include(refusal!, "is full")
    // A refusal of LMDB's names the transaction it had no room for: one batch's (8 x 180 kB), not all
    // that waited.
    const need = /LMDB's next transaction may need ([\d.]+) MiB/.exec(refusal!)
    if (need !== null) assert.isBelow(Number(need[1]), 3, refusal)

    await freeAndWriteAgain(client, freeFlag)
    const read = await callTool(client, "open_nodes", { names: [...acknowledged, "after-space-returned"] })
    // In the order they were created, which eight writers at once do not fix: compared as sets.
    assert.sameMembers(
      (read.structured as { entities: ReadonlyArray<{ name: string }> }).entities.map((entity) => entity.name),
      [...acknowledged, "after-space-returned"],
    )
    assert.strictEqual((await graphHealth(daemon)).state, "running")
    assertLmdbNeverMetTheFullDisk(daemon)
    await daemon.stop()
  })

  it("with the search index on a full disk too, bulk writes of 30,000-character observations are refused, never crash the daemon, and resume", async () => {
    const { freeFlag, daemon, client } = await startOnSmallDisks("mnemos-full-disk-bulk-", {
      mounts: ["stores", "search"],
    })
    const text = (name: string, part: number) => `${name} part ${part} `.repeat(2_000).slice(0, 30_000)
    const acknowledged: Array<string> = []
    let refusals = 0
    // Bulk calls of ten entities, each with two observations of 30,000 characters; on past the
    // first refusal (acknowledged writes while full must be kept too), and notes in another store.
    for (let call = 0; call < 60 && refusals < 5; call++) {
      const names = Array.from({ length: 10 }, (_, index) => `bulk-${call}-${index}`)
      const result = await callTool(
        client,
        "create_entities",
        {
          entities: names.map((name) => ({ name, entityType: "filler", observations: [text(name, 1), text(name, 2)] })),
        },
        30_000,
      ).catch((error: Error) => {
        throw new Error(
          `call ${call} got no answer (${error.message}); the daemon said:\n${daemon.output().slice(-4000)}`,
        )
      })
      if (result.isError) {
        refusals++
        assert.include(result.text, "is full")
      } else acknowledged.push(...names)
      await callTool(client, "add_sticky_note", { text: text(`note-${call}`, 0) })
    }
    assert.isAbove(refusals, 0, `${acknowledged.length} entities of 60 kB fit on ${storesTmpfsBytes >> 20} MiB disks`)
    assert.isNull((await Promise.race([daemon.exited, sleep(500)])) ?? null, "the daemon is still running")
    const read = await callTool(client, "open_nodes", { names: acknowledged })
    assert.isFalse(read.isError, read.text)
    assert.strictEqual((read.structured as { entities: ReadonlyArray<unknown> }).entities.length, acknowledged.length)
    const search = await callTool(client, "search_nodes", { query: "bulk-0-0" })
    assert.isFalse(search.isError, search.text)

    writeFileSync(freeFlag, "")
    const resumed = await waitFor(
      "a write after the ballast is gone",
      async () => {
        const result = await callTool(client, "create_entities", {
          entities: [{ name: "after-space-returned", entityType: "t", observations: [text("after", 1)] }],
        })
        return result.isError ? undefined : result
      },
      30_000,
    )
    assert.isFalse(resumed.isError)
    assert.isNull((await Promise.race([daemon.exited, sleep(100)])) ?? null, "the daemon is still running")
    assertLmdbNeverMetTheFullDisk(daemon)
    await daemon.stop()
  })

  it("search first opening its index on a full disk: the daemon stays up, and search catches up once space returns", async () => {
    // LMDB makes its lock file sparse and writes it through a memory map: on a full disk that
    // killed the process with SIGBUS the moment the search thread first opened its index.
    const { freeFlag, daemon, client } = await startOnSmallDisks("mnemos-full-disk-search-", {
      filled: ["search"],
    })
    const written = await callTool(client, "create_entities", {
      entities: [{ name: "written-while-search-is-full", entityType: "t", observations: ["zanzibar lighthouse"] }],
    })
    assert.isFalse(written.isError, written.text)
    // The search thread starts for that write and for this search, on the full disk.
    await callTool(client, "search_nodes", { query: "zanzibar" }).catch(() => undefined)
    await sleep(2_000)
    assert.isNull(
      (await Promise.race([daemon.exited, sleep(500)])) ?? null,
      `the daemon is still running:\n${daemon.output().slice(-3000)}`,
    )
    const read = await callTool(client, "open_nodes", { names: ["written-while-search-is-full"] })
    assert.isFalse(read.isError, read.text)

    writeFileSync(freeFlag, "")
    const found = await waitFor(
      "search to find the write once space returned",
      async () => {
        const result = await callTool(client, "search_nodes", { query: "zanzibar" })
        return !result.isError && result.text.includes("written-while-search-is-full") ? result : undefined
      },
      60_000,
      500,
    )
    assert.isFalse(found.isError)
    assert.isNull((await Promise.race([daemon.exited, sleep(100)])) ?? null, "the daemon is still running")
    assertLmdbNeverMetTheFullDisk(daemon)
    await daemon.stop()
  })
})
