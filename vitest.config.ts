import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", "proto/gen/**"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
})
