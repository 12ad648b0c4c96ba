/**
 * Any local user can send a focus datagram, so the Neovim address one names is used only when it
 * is a Unix socket of the daemon's own user: a TCP port or another user's socket is refused with
 * a message saying how to use it anyway (`--nvim`, `$NVIM`); those two still win over any focus.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { createServer, type Server } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { EditorFocus, makeMemoryEditorFocus } from "../../src/editor/EditorFocus.ts"
import { focusAddressProblem, NeovimConfig, resolveServer } from "../../src/editor/Neovim.ts"

const dir = mkdtempSync(join(tmpdir(), "mnemos-focus-address-"))
const socketPath = join(dir, "nvim.sock")
let listener: Server
beforeAll(
  () =>
    new Promise<void>((resolve) => {
      listener = createServer().listen(socketPath, resolve)
    }),
)
afterAll(
  () =>
    new Promise<void>((resolve) => {
      listener.close(() => {
        rmSync(dir, { recursive: true, force: true })
        resolve()
      })
    }),
)

const uid = process.getuid!()

describe.skipIf(process.platform === "win32")("the Neovim address of a focus datagram", () => {
  it("a socket of this user is used; one of another user, or a TCP port, is not", () => {
    assert.isUndefined(focusAddressProblem(socketPath, uid))
    assert.include(focusAddressProblem(socketPath, uid + 1), "belongs to another user")
    assert.include(focusAddressProblem("127.0.0.1:6666", uid), "is a TCP port")
    assert.include(focusAddressProblem("[::1]:6666", uid), "--nvim")
    // A socket that is gone is left to the connection, which says the instance has quit.
    assert.isUndefined(focusAddressProblem(join(dir, "gone.sock"), uid))
  })

  const withFocus = (server: string) => {
    const focus = makeMemoryEditorFocus()
    focus.report({ file: "/work/a.ts", line: 1, col: 1, session: "nvim-1", server })
    return focus
  }

  it.effect("resolveServer refuses a forged TCP address from focus, and --nvim still wins over it", () =>
    Effect.gen(function* () {
      const refused = yield* resolveServer.pipe(
        Effect.provideService(NeovimConfig, { executeLuaEnabled: false }),
        Effect.provideService(EditorFocus, withFocus("127.0.0.1:6379")),
        Effect.flip,
      )
      assert.strictEqual(refused.reason, "NoInstance")
      assert.include(refused.message, "TCP port")
      const flag = yield* resolveServer.pipe(
        Effect.provideService(NeovimConfig, { address: "127.0.0.1:6666", executeLuaEnabled: false }),
        Effect.provideService(EditorFocus, withFocus("127.0.0.1:6379")),
      )
      assert.deepStrictEqual(flag, { address: "127.0.0.1:6666", source: "flag" })
      const own = yield* resolveServer.pipe(
        Effect.provideService(NeovimConfig, { executeLuaEnabled: false }),
        Effect.provideService(EditorFocus, withFocus(socketPath)),
      )
      assert.deepStrictEqual(own, { address: socketPath, source: "focus" })
    }),
  )
})
