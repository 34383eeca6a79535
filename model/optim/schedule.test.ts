import { describe, expect, it } from "vitest"
import { OptimizerError } from "./errors.ts"
import { type LrScheduleOptions, lrSchedule } from "./schedule.ts"

const messageOf = (f: () => unknown): string => {
  try {
    f()
  } catch (e) {
    if (e instanceof OptimizerError) return e.message
    throw e
  }
  throw new Error("expected an OptimizerError")
}

describe("lrSchedule", () => {
  it("warms up linearly, reaching the peak on the last warm-up step", () => {
    const lr = lrSchedule({ peakLr: 1e-3, warmupSteps: 4, after: "constant" })
    expect([0, 1, 2, 3, 4, 100].map(lr)).toEqual([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])
  })

  it("decays along a half cosine to minLr at totalSteps and stays there", () => {
    const lr = lrSchedule({
      peakLr: 1,
      warmupSteps: 10,
      after: "cosine",
      totalSteps: 110,
      minLr: 0.1,
    })
    expect(lr(9)).toBe(1)
    expect(lr(10)).toBe(1)
    expect(lr(35)).toBeCloseTo(0.1 + 0.9 * 0.5 * (1 + Math.SQRT1_2), 12) // a quarter of the way
    expect(lr(60)).toBeCloseTo(0.55, 12) // half way
    expect(lr(110)).toBeCloseTo(0.1, 12)
    expect(lr(500)).toBeCloseTo(0.1, 12)
    for (let s = 11; s <= 110; s++) expect(lr(s)).toBeLessThan(lr(s - 1))
  })

  it("works without warm-up, and with totalSteps equal to warmupSteps", () => {
    expect(lrSchedule({ peakLr: 2, warmupSteps: 0, after: "cosine", totalSteps: 4 })(0)).toBe(2)
    expect(
      lrSchedule({ peakLr: 2, warmupSteps: 0, after: "cosine", totalSteps: 4 })(4),
    ).toBeCloseTo(0, 12)
    const flat = lrSchedule({ peakLr: 2, warmupSteps: 3, after: "cosine", totalSteps: 3, minLr: 1 })
    expect([2, 3, 4].map(flat)).toEqual([2, 1, 1])
  })

  it("checks its options and steps", () => {
    const bad = (o: LrScheduleOptions) => messageOf(() => lrSchedule(o))
    expect(bad({ peakLr: -1, warmupSteps: 0, after: "constant" })).toBe(
      "peakLr: must be a finite number ≥ 0, got -1",
    )
    expect(bad({ peakLr: 1, warmupSteps: 1.5, after: "constant" })).toBe(
      "warmupSteps: must be a non-negative integer, got 1.5",
    )
    expect(bad({ peakLr: 1, warmupSteps: 10, after: "cosine", totalSteps: 5 })).toBe(
      "totalSteps: must be an integer ≥ warmupSteps (10), got 5",
    )
    expect(bad({ peakLr: 1, warmupSteps: 0, after: "cosine", totalSteps: 5, minLr: 2 })).toBe(
      "minLr: must be in [0, peakLr = 1], got 2",
    )
    expect(
      bad({ peakLr: 1, warmupSteps: 0, after: "linear" } as unknown as LrScheduleOptions),
    ).toBe('after: must be "constant" or "cosine", got "linear"')
    const lr = lrSchedule({ peakLr: 1, warmupSteps: 0, after: "constant" })
    expect(messageOf(() => lr(-1))).toBe("step: must be a non-negative integer, got -1")
  })
})
