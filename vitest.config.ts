import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", "proto/gen/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // CI also writes a JSON report, from which .ci/run prints one "N passed, N failed" line.
    reporters: process.env.CI
      ? ["default", ["json", { outputFile: ".t1/vitest.json" }]]
      : ["default"],
  },
})
