import { describe, expect, it } from "vitest"
import { type ArmSeed, ablationMarkdown, ablationRow, ablationTable } from "./ablation.ts"
import { stratifiedPairedInterval } from "./stats.ts"

const seed = (s: number, over: Partial<ArmSeed> = {}): ArmSeed => ({
  seed: s,
  before: 0.25,
  after: 0.5,
  taskGains: [0.5, 0, 0.5, 0],
  steps: 4,
  logprobDiffs: [0.01, 0.03],
  ...over,
})

describe("ablationRow", () => {
  it("takes the mean gain over seeds and the paired interval over their tasks", () => {
    const a = seed(0, { before: 0.2, after: 0.6, taskGains: [1, 0, 0.5, 0.1] })
    const b = seed(1, { before: 0.4, after: 0.3, taskGains: [-0.5, 0, 0.1, 0] })
    const row = ablationRow("binary reward", [a, b])
    expect(row.seeds).toBe(2)
    expect(row.resolved_before).toBeCloseTo(0.3)
    expect(row.resolved_after).toBeCloseTo(0.45)
    expect(row.gain).toBeCloseTo((0.4 + -0.1) / 2)
    expect(row.gain_ci95).toEqual(stratifiedPairedInterval([a.taskGains, b.taskGains]))
    // By hand: stratum means 0.4 and −0.1; sample variances 0.62/3 and 0.22/3, each over 4 tasks.
    const half = 1.96 * Math.sqrt((0.62 / 3 / 4 + 0.22 / 3 / 4) / 4)
    expect(row.gain_ci95[0]).toBeCloseTo(0.15 - half, 10)
    expect(row.gain_ci95[1]).toBeCloseTo(0.15 + half, 10)
  })

  it("pools the mismatch over the updates that trained, and says null when none did", () => {
    const row = ablationRow("v", [
      seed(0, { logprobDiffs: [0.1] }),
      seed(1, { logprobDiffs: [0.2, 0.3, 0.4] }),
    ])
    expect(row.logprob_diff).toBeCloseTo(0.25)
    expect(ablationRow("v", [seed(0, { logprobDiffs: [] })]).logprob_diff).toBeNull()
  })

  it("refuses a variant without seed runs", () => {
    expect(() => ablationRow("v", [])).toThrow(/no seed run/)
  })
})

describe("ablationTable", () => {
  const main = [seed(0, { before: 0.1, after: 0.3 }), seed(1, { before: 0.2, after: 0.2 })]
  const table = ablationTable({ variant: "default (group)", seeds: main }, [
    { variant: "binary reward", seeds: [seed(0), seed(1)] },
    { variant: "TITO off", reason: "seed 0 failed: no template" },
    { variant: "R3 off", seeds: [seed(0, { after: 0.75 }), seed(1, { after: 0.75 })] },
  ])

  it("puts the default arm first, from the main seeds' results", () => {
    expect(table.ablation[0]).toEqual(ablationRow("default (group)", main))
    expect(table.ablation[0]?.gain).toBeCloseTo(0.1)
    expect(table.ablation.map((r) => r.variant)).toEqual([
      "default (group)",
      "binary reward",
      "R3 off",
    ])
    expect(table.ablation[2]?.gain).toBeCloseTo(0.5)
  })

  it("lists a variant that could not run apart, with its reason, and gives it no row", () => {
    expect(table.ablation_skipped).toEqual([
      { variant: "TITO off", reason: "seed 0 failed: no template" },
    ])
    expect(table.ablation.some((r) => r.variant === "TITO off")).toBe(false)
    const md = ablationMarkdown(table.ablation, table.ablation_skipped)
    expect(md.split("\n").filter((l) => l.startsWith("| TITO off"))).toEqual([])
    expect(md).toContain("not run: TITO off: seed 0 failed: no template")
    expect(md).toContain("| default (group) | 2 | 15.0% | 25.0% | 10.0% |")
  })
})
