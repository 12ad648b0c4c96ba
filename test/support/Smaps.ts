/**
 * A file's memory maps in this process, from /proc/self/smaps (Linux): each map's size and the
 * bytes of it that are resident.
 */
import { readFileSync } from "node:fs"

/** One map of a file: its size, and how much of it is resident. */
export interface FileMap {
  readonly bytes: number
  readonly resident: number
}

/** Each map of `file` in this process, in address order. */
export const mapsOf = (file: string): Array<FileMap> => {
  const maps: Array<{ bytes: number; resident: number }> = []
  let current: { bytes: number; resident: number } | undefined
  for (const line of readFileSync("/proc/self/smaps", "utf8").split("\n")) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (header !== null) {
      current =
        header[3] === file
          ? { bytes: Number.parseInt(header[2]!, 16) - Number.parseInt(header[1]!, 16), resident: 0 }
          : undefined
      if (current !== undefined) maps.push(current)
      continue
    }
    const rss = current === undefined ? null : /^Rss:\s+(\d+) kB$/.exec(line)
    if (current !== undefined && rss !== null) current.resident += Number(rss[1]) * 1024
  }
  return maps
}

/** The resident bytes of all of `file`'s maps in this process. */
export const residentBytesOf = (file: string): number => mapsOf(file).reduce((sum, map) => sum + map.resident, 0)
