import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { type FsError, WalFs } from "../src/stores/wal/WalFs.ts"
import { layer, SimulatedDisk } from "./support/SimulatedDisk.js"

type Fs = WalFs["Service"]

const dir = "/data/stores/x/wal"
const segment = `${dir}/000001.log`
const sectorBytes = 512
const seeds = Array.from({ length: 200 }, (_, i) => i + 1)

const program = <A>(disk: SimulatedDisk, body: (fs: Fs) => Effect.Effect<A, FsError>) =>
  Effect.gen(function* () {
    return yield* body(yield* WalFs)
  }).pipe(Effect.provide(layer(disk)))
const run = <A>(disk: SimulatedDisk, body: (fs: Fs) => Effect.Effect<A, FsError>): A =>
  Effect.runSync(program(disk, body))
const fail = <A>(disk: SimulatedDisk, body: (fs: Fs) => Effect.Effect<A, FsError>): FsError =>
  Effect.runSync(Effect.flip(program(disk, body)))

const bytes = (length: number, value: number) => new Uint8Array(length).fill(value)
const concat = (...parts: ReadonlyArray<Uint8Array>) => Uint8Array.from(parts.flatMap((part) => [...part]))
const sectorsOf = (image: Uint8Array) =>
  Array.from({ length: Math.ceil(image.length / sectorBytes) }, (_, i) =>
    image.subarray(i * sectorBytes, (i + 1) * sectorBytes),
  )

/** A disk whose segment holds `content`, durably: data synced and entry synced. */
const diskWith = (seed: number, content: Uint8Array, options: { sectorBytes?: number } = {}) => {
  const disk = new SimulatedDisk({ seed, ...options })
  run(disk, (fs) =>
    Effect.gen(function* () {
      yield* fs.mkdirp(dir)
      const file = yield* fs.open(segment, { create: true })
      yield* file.write(0, content)
      yield* file.datasync()
      yield* fs.syncDir(dir)
    }),
  )
  return disk
}
const writeUnsynced = (disk: SimulatedDisk, offset: number, data: Uint8Array) =>
  run(disk, (fs) => Effect.flatMap(fs.open(segment, { create: false }), (file) => file.write(offset, data)))

describe("SimulatedDisk as a WalFs", () => {
  it("reads what was written, short at EOF, and lists directories sorted", () => {
    const disk = new SimulatedDisk()
    const result = run(disk, (fs) =>
      Effect.gen(function* () {
        yield* fs.mkdirp(dir)
        const b = yield* fs.open(`${dir}/b.log`, { create: true })
        yield* b.write(4, Uint8Array.of(1, 2, 3))
        yield* fs.open(`${dir}/a.log`, { create: true })
        yield* fs.mkdirp(`${dir}/sub`)
        return {
          size: yield* b.size(),
          head: yield* b.read(0, 5),
          tail: yield* b.read(5, 100),
          past: yield* b.read(50, 10),
          names: yield* fs.list(dir),
          missing: yield* fs.list("/nowhere"),
        }
      }),
    )
    expect(result).toEqual({
      size: 7,
      head: Uint8Array.of(0, 0, 0, 0, 1),
      tail: Uint8Array.of(2, 3),
      past: new Uint8Array(0),
      names: ["a.log", "b.log", "sub"],
      missing: [],
    })
    expect(disk.files()).toEqual([`${dir}/a.log`, `${dir}/b.log`])
  })

  it("fails open of a missing file with NotFound, in the error channel", () => {
    const disk = new SimulatedDisk()
    run(disk, (fs) => fs.mkdirp(dir))
    const missing = fail(disk, (fs) => fs.open(segment, { create: false }))
    expect(missing).toMatchObject({ _tag: "FsError", reason: "NotFound", op: "open", path: segment })
    expect(fail(disk, (fs) => fs.open("/no/dir/x.log", { create: true })).reason).toBe("NotFound")
    expect(fail(disk, (fs) => fs.remove(segment)).reason).toBe("NotFound")
  })

  it("counts successful writes, datasyncs and syncDirs", () => {
    const disk = diskWith(1, bytes(10, 7))
    writeUnsynced(disk, 10, bytes(5, 8))
    expect(disk.stats).toEqual({ writes: 2, bytesWritten: 15, datasyncs: 1, syncDirs: 1 })
    expect(disk.opCount).toBe(6)
  })
})

describe("crash", () => {
  it("never loses synced data", () => {
    const content = Uint8Array.from({ length: 2000 }, (_, i) => i % 251)
    for (const seed of seeds.slice(0, 50)) {
      const after = diskWith(seed, content).crash()
      expect(after.readWritten(segment)).toEqual(content)
      expect(after.readDurable(segment)).toEqual(content)
    }
  })

  it("may lose or shorten an unsynced tail, only at sector boundaries, never inventing bytes", () => {
    const head = bytes(100, 0x11)
    const tail = bytes(4 * sectorBytes - 100, 0x22)
    const full = concat(head, tail)
    const sizes = new Set<number>()
    let keptAll = false
    for (const seed of seeds) {
      const disk = diskWith(seed, head)
      writeUnsynced(disk, 100, tail)
      expect(disk.readDurable(segment)).toEqual(head)
      const image = disk.crash().readWritten(segment)!
      sizes.add(image.length)
      keptAll ||= image.length === full.length && image.every((b, i) => b === full[i])
      expect(image.subarray(0, 100)).toEqual(head)
      sectorsOf(image).forEach((sector, i) => {
        const whole = full.subarray(i * sectorBytes, i * sectorBytes + sector.length)
        const old = concat(i === 0 ? head : new Uint8Array(0), new Uint8Array(sector.length)).subarray(0, sector.length)
        expect(sector.every((b, j) => b === whole[j]) || sector.every((b, j) => b === old[j])).toBe(true)
      })
    }
    expect([...sizes].sort((a, b) => a - b)).toEqual([100, 512, 1024, 1536, 2048])
    expect(keptAll).toBe(true)
  })

  it("tears an overwrite per sector: each sector is wholly old or wholly new", () => {
    const old = bytes(3 * sectorBytes, 0xaa)
    const seen = new Set<string>()
    for (const seed of seeds) {
      const disk = diskWith(seed, old)
      writeUnsynced(disk, 100, bytes(3 * sectorBytes - 200, 0xbb))
      const image = disk.crash().readWritten(segment)!
      expect(image.length).toBe(3 * sectorBytes)
      const shape = sectorsOf(image)
        .map((sector, i) => {
          const fresh = disk.readWritten(segment)!.subarray(i * sectorBytes, (i + 1) * sectorBytes)
          if (sector.every((b) => b === 0xaa)) return "old"
          expect(sector).toEqual(fresh)
          return "new"
        })
        .join(",")
      seen.add(shape)
    }
    expect(seen.size).toBe(8)
  })

  it("tears at the configured sector size", () => {
    const shapes = new Set<number>()
    for (const seed of seeds.slice(0, 40)) {
      const disk = diskWith(seed, bytes(3 * sectorBytes, 0xaa), { sectorBytes: 4096 })
      writeUnsynced(disk, 0, bytes(3 * sectorBytes, 0xbb))
      const image = disk.crash().readWritten(segment)!
      expect(image.every((b) => b === image[0])).toBe(true)
      shapes.add(image[0]!)
    }
    expect(shapes).toEqual(new Set([0xaa, 0xbb]))
  })

  it("may drop a file whose creation was not synced, but keeps it once its directory is synced", () => {
    const content = bytes(700, 0x33)
    const outcomes = new Set<string>()
    for (const seed of seeds.slice(0, 50)) {
      const create = (syncDir: boolean) => {
        const disk = new SimulatedDisk({ seed })
        run(disk, (fs) =>
          Effect.gen(function* () {
            yield* fs.mkdirp(dir)
            const file = yield* fs.open(segment, { create: true })
            yield* file.write(0, content)
            yield* file.datasync()
            if (syncDir) yield* fs.syncDir(dir)
          }),
        )
        return disk
      }
      const unsynced = create(false)
      expect(unsynced.readDurable(segment)).toBeUndefined()
      const after = unsynced.crash()
      const image = after.readWritten(segment)
      if (image !== undefined) expect(image).toEqual(content)
      expect(run(after, (fs) => fs.list(dir))).toEqual(image === undefined ? [] : ["000001.log"])
      outcomes.add(image === undefined ? "gone" : "kept")
      expect(create(true).crash().readWritten(segment)).toEqual(content)
    }
    expect(outcomes).toEqual(new Set(["gone", "kept"]))
  })

  it("may undo an unsynced removal, and not a synced one", () => {
    const outcomes = new Set<number>()
    for (const seed of seeds.slice(0, 50)) {
      const disk = diskWith(seed, bytes(10, 1))
      run(disk, (fs) => fs.remove(segment))
      expect(disk.files()).toEqual([])
      expect(disk.files("durable")).toEqual([segment])
      outcomes.add(disk.crash().files().length)
      const synced = diskWith(seed, bytes(10, 1))
      run(synced, (fs) => Effect.andThen(fs.remove(segment), fs.syncDir(dir)))
      expect(synced.crash().files()).toEqual([])
    }
    expect(outcomes).toEqual(new Set([0, 1]))
  })

  it("keeps a truncate only once datasync returned", () => {
    const content = Uint8Array.from({ length: 2 * sectorBytes }, (_, i) => i % 256)
    const sizes = new Set<number>()
    for (const seed of seeds.slice(0, 50)) {
      const disk = diskWith(seed, content)
      const truncate = (sync: boolean) => (fs: Fs) =>
        Effect.gen(function* () {
          const file = yield* fs.open(segment, { create: false })
          yield* file.truncate(100)
          if (sync) yield* file.datasync()
        })
      run(disk, truncate(false))
      expect(disk.readWritten(segment)).toEqual(content.subarray(0, 100))
      expect(disk.readDurable(segment)).toEqual(content)
      const image = disk.crash().readWritten(segment)!
      sizes.add(image.length)
      if (image.length === 100) expect(image).toEqual(content.subarray(0, 100))
      else expect(image.subarray(sectorBytes)).toEqual(content.subarray(sectorBytes))
      const synced = diskWith(seed, content)
      run(synced, truncate(true))
      expect(synced.readDurable(segment)).toEqual(content.subarray(0, 100))
      expect(synced.crash().readWritten(segment)).toEqual(content.subarray(0, 100))
    }
    expect(sizes).toEqual(new Set([100, 2 * sectorBytes]))
  })

  it("keeps a rename atomic: old name with its content, or new name replacing the target", () => {
    const final = `${dir}/checkpoint`
    const tmp = `${dir}/checkpoint.tmp`
    const outcomes = new Set<string>()
    for (const seed of seeds.slice(0, 50)) {
      const disk = new SimulatedDisk({ seed })
      const setup = (fs: Fs) =>
        Effect.gen(function* () {
          yield* fs.mkdirp(dir)
          for (const [path, value] of [
            [final, 1],
            [tmp, 2],
          ] as const) {
            const file = yield* fs.open(path, { create: true })
            yield* file.write(0, bytes(600, value))
            yield* file.datasync()
          }
          yield* fs.syncDir(dir)
          yield* fs.rename(tmp, final)
        })
      run(disk, setup)
      expect(disk.files()).toEqual([final])
      const after = disk.crash()
      const state = after.files().map((path) => `${path}=${after.readWritten(path)![0]}`)
      outcomes.add(state.join(" "))
      const synced = new SimulatedDisk({ seed })
      run(synced, (fs) => Effect.andThen(setup(fs), fs.syncDir(dir)))
      expect(synced.crash().readWritten(final)).toEqual(bytes(600, 2))
    }
    expect(outcomes).toEqual(new Set([`${final}=2`, `${final}=1 ${tmp}=2`]))
  })

  it("replays exactly from the same seed, and differs across seeds", () => {
    const image = (seed: number) => {
      const disk = diskWith(seed, bytes(1500, 0x10))
      writeUnsynced(disk, 700, bytes(3000, 0x20))
      run(disk, (fs) => Effect.andThen(fs.open(`${dir}/000002.log`, { create: true }), fs.remove(`${dir}/000001.log`)))
      const after = disk.crash()
      return after.files().map((path) => [path, after.readWritten(path)])
    }
    expect(image(42)).toEqual(image(42))
    const distinct = new Set(seeds.slice(0, 20).map((seed) => JSON.stringify(image(seed))))
    expect(distinct.size).toBeGreaterThan(3)
  })

  it("powers the old disk off: its handles fail after crash()", () => {
    const disk = diskWith(1, bytes(10, 1))
    const file = run(disk, (fs) => fs.open(segment, { create: false }))
    const after = disk.crash()
    expect(disk.crashed).toBe(true)
    expect(Effect.runSync(Effect.flip(file.read(0, 10))).message).toContain("simulated crash")
    expect(run(after, (fs) => Effect.flatMap(fs.open(segment, { create: false }), (f) => f.read(0, 10)))).toEqual(
      bytes(10, 1),
    )
  })

  it("flipByte corrupts one byte in both images, and the flip survives a crash", () => {
    const disk = diskWith(1, bytes(10, 0x0f))
    disk.flipByte(segment, 3)
    const expected = Uint8Array.of(15, 15, 15, 0xf0, 15, 15, 15, 15, 15, 15)
    expect(disk.readWritten(segment)).toEqual(expected)
    expect(disk.readDurable(segment)).toEqual(expected)
    expect(disk.crash().readWritten(segment)).toEqual(expected)
    expect(() => disk.flipByte(segment, 10)).toThrow(RangeError)
  })
})

describe("fault injection", () => {
  const writeEach = (disk: SimulatedDisk, values: ReadonlyArray<number>) =>
    values.map((value, i) => {
      const result = Effect.runSync(
        Effect.result(
          program(disk, (fs) =>
            Effect.flatMap(fs.open(segment, { create: false }), (file) => file.write(i, Uint8Array.of(value))),
          ),
        ),
      )
      return result._tag === "Success" ? "ok" : result.failure.reason
    })

  it("failAfter fails the n-th matching operation once, applying nothing", () => {
    const disk = diskWith(1, new Uint8Array(0))
    disk.failAfter(1, { op: "write", kind: "NoSpace" })
    expect(writeEach(disk, [1, 2, 3, 4])).toEqual(["ok", "NoSpace", "ok", "ok"])
    // the opens between the writes did not match, so did not count
    expect(disk.readWritten(segment)).toEqual(Uint8Array.of(1, 0, 3, 4))
  })

  it("failAfter persistent fails every matching operation until clearFaults()", () => {
    const disk = diskWith(1, new Uint8Array(0))
    disk.failAfter(0, { op: "fdatasync", persistent: true })
    expect(writeEach(disk, [1, 2])).toEqual(["ok", "ok"])
    const sync = (fs: Fs) => Effect.flatMap(fs.open(segment, { create: false }), (file) => file.datasync())
    expect(fail(disk, sync)).toMatchObject({ reason: "Io", op: "fdatasync" })
    expect(fail(disk, sync).reason).toBe("Io")
    expect(disk.readDurable(segment)).toEqual(new Uint8Array(0))
    disk.clearFaults()
    run(disk, sync)
    expect(disk.readDurable(segment)).toEqual(Uint8Array.of(1, 2))
  })

  it("failAfter with op any counts every disk operation", () => {
    const disk = diskWith(1, new Uint8Array(0))
    disk.failAfter(1, { op: "any" })
    // open is operation 0, the write is operation 1
    expect(writeEach(disk, [9])).toEqual(["Io"])
  })

  /** open, syncDir, write A, datasync, write B: five disk operations. */
  const workload = (fs: Fs) =>
    Effect.gen(function* () {
      yield* fs.mkdirp(dir)
      const file = yield* fs.open(segment, { create: true })
      yield* fs.syncDir(dir)
      yield* file.write(0, bytes(sectorBytes, 0xa1))
      yield* file.datasync()
      yield* file.write(sectorBytes, bytes(sectorBytes, 0xb2))
    })

  it("crashAfter cuts the power at operation n; crash() yields the durable view", () => {
    const counter = new SimulatedDisk({ seed: 7 })
    run(counter, workload)
    expect(counter.opCount).toBe(5)
    for (let n = 0; n <= counter.opCount; n++) {
      const disk = new SimulatedDisk({ seed: 7 })
      disk.crashAfter(n)
      const outcome = Effect.runSync(Effect.result(program(disk, workload)))
      if (n < 5) {
        expect(outcome._tag === "Failure" && outcome.failure).toMatchObject({ reason: "Io" })
        expect(outcome._tag === "Failure" && outcome.failure.message).toContain("simulated crash")
        expect(disk.crashed).toBe(true)
        expect(disk.opCount).toBe(n + 1)
        expect(fail(disk, (fs) => fs.list(dir)).message).toContain("simulated crash")
      } else expect(outcome._tag).toBe("Success")
      const image = disk.crash().readWritten(segment)
      // before syncDir returned the file may be gone; once it did, the file exists
      if (n < 2) expect(image === undefined || image.length === 0).toBe(true)
      else expect(image).toBeDefined()
      // before datasync returned, A may be lost (zeros past the durable size) but never half-kept
      if (n >= 2 && n < 4) {
        const whole = sectorsOf(image!).map((s) => s.every((b) => b === 0xa1) || s.every((b) => b === 0))
        expect(whole).not.toContain(false)
      }
      // after it, A is kept; B may add a sector (of B or zeros)
      if (n >= 4) {
        expect(image!.subarray(0, sectorBytes)).toEqual(bytes(sectorBytes, 0xa1))
        expect([sectorBytes, 2 * sectorBytes]).toContain(image!.length)
      }
    }
  })

  it("a write cut by the power loss reaches the written image in whole sectors, or not at all", () => {
    const shapes = new Set<string>()
    for (const seed of seeds.slice(0, 60)) {
      const disk = diskWith(seed, new Uint8Array(0))
      disk.crashAfter(1) // open is operation 0, the write operation 1
      expect(
        fail(disk, (fs) => Effect.flatMap(fs.open(segment, { create: false }), (f) => f.write(0, bytes(1536, 5)))),
      ).toMatchObject({ reason: "Io" })
      const written = disk.readWritten(segment)!
      const shape = sectorsOf(written).map((sector) => {
        expect(sector.every((b) => b === 5) || sector.every((b) => b === 0)).toBe(true)
        return sector[0] === 5 ? "w" : "-"
      })
      shapes.add(shape.join(""))
    }
    expect(shapes).toEqual(new Set(["", "w", "-w", "ww", "--w", "-ww", "w-w", "www"]))
  })
})
