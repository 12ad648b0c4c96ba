/**
 * The address space an LMDB environment maps, reserved once when it opens. lmdb-js starts a map at
 * 128 KiB and, each time the file outgrows it, maps the file again about twice as large — and keeps
 * every earlier map, since buffers it handed out may still point into them. A page read or written
 * through an earlier map stays resident in it, so a file grown from nothing in one run was resident
 * up to twice over: 84 MiB of maps for a 39.5 MiB file written by 200 transactions (eight maps of
 * 0.1 to 47.8 MiB), and in the 10k graph workload the graph store's 15 MiB file held 29 MiB and
 * search's 37 MiB file 52 MiB (docs/benchmarks.md, "One map per LMDB file").
 *
 * Mapped at `lmdbMapBytes` from the start, a file of any size up to it is one map, and each of its
 * pages resident once. The map is address space, not memory: LMDB maps its file read-only and
 * writes with pwrite, so neither the file (which grows only as pages are written) nor RAM grows
 * with it, and a shared file map is not charged against the system's commit limit. A file that
 * outgrows it is mapped again as before (lmdb-js grows any map that fills), so the bound is not a
 * size limit. Left to lmdb-js on Windows, where LMDB sizes the file to its map, and on 32-bit
 * systems, whose address space lmdb-js maps in chunks.
 */
import { arch, platform } from "node:os"

/** The map every environment opens with: 8 GiB of address space (at 100,000 entities search's file is 350 MiB, the graph store's 180). */
export const lmdbMapBytes = 8 * 1024 ** 3

const thirtyTwoBit = new Set(["arm", "ia32", "mips", "mipsel", "ppc", "s390"])

/** lmdb-js's `mapSize` for an environment opened here: `lmdbMapBytes` where the map is only address space. */
export const lmdbMapOptions = (): { readonly mapSize?: number } =>
  platform() === "win32" || thirtyTwoBit.has(arch()) ? {} : { mapSize: lmdbMapBytes }
