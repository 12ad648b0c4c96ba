/**
 * Builds the dashboard (src/dashboard) into dist/dashboard, which the daemon serves at `GET /`.
 * Everything is bundled: the page loads nothing from elsewhere.
 */
import { fileURLToPath } from "node:url"
import { defineConfig } from "vite"

const root = fileURLToPath(new URL("./src/dashboard", import.meta.url))

export default defineConfig({
  root,
  base: "/",
  publicDir: "public",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: process.env.MNEMOS_DASHBOARD_OUT_DIR ?? fileURLToPath(new URL("./dist/dashboard", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    chunkSizeWarningLimit: 1024,
    reportCompressedSize: false,
  },
})
