import { describe, expect, it } from "vitest"
import { runTarget } from "./harness.ts"
import { TARGETS } from "./targets/index.ts"

/** `npm run test:fuzz` in small: every target, 100 cases from the default seed, no crash. */
describe("fuzz targets (100 cases each; npm run test:fuzz runs 2000)", () => {
  it.each(TARGETS.map((t) => [t.name, t] as const))(
    "%s: every input is accepted or rejected with a typed error",
    async (_name, target) => {
      const report = await runTarget(target, { iterations: 100, seed: 1 })
      expect(report.iterations).toBe(100)
      expect(
        report.examples.map(
          (c) => `case ${c.index}: ${c.reason}\n  input ${c.input.slice(0, 2000)}`,
        ),
      ).toEqual([])
      expect(report.crashes).toBe(0)
    },
    60_000,
  )
})
