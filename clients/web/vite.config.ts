import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// The chat UI: `vite build` writes dist/, which `make run`/`make up` serve on :3000
// (src/batchline/webui.py) and the web image serves with nginx.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  build: { outDir: "dist", emptyOutDir: true, target: "es2022" },
  server: { host: "127.0.0.1", port: 3000, strictPort: true },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
});
