import { describe, expect, it } from "vitest"
import { mean, median, stratifiedPairedInterval, tInterval, wilson } from "./stats.ts"

describe("experiment intervals", () => {
  it("median of odd and even counts, unsorted input left as it was", () => {
    const xs = [5, 1, 3]
    expect(median(xs)).toBe(3)
    expect(xs).toEqual([5, 1, 3])
    expect(median([4, 1, 3, 2])).toBe(2.5)
    expect(median([])).toBeNaN()
  })

  it("t interval of three gains against hand values", () => {
    // mean 0.2, sd 0.1, t(2) = 4.303: 0.2 ± 4.303 · 0.1 / √3
    const [lo, hi] = tInterval([0.1, 0.2, 0.3])
    expect(lo).toBeCloseTo(0.2 - (4.303 * 0.1) / Math.sqrt(3), 6)
    expect(hi).toBeCloseTo(0.2 + (4.303 * 0.1) / Math.sqrt(3), 6)
    expect(tInterval([0.4])).toEqual([0.4, 0.4])
  })

  it("Wilson interval against a hand value", () => {
    const [lo, hi] = wilson(5, 10)
    expect(lo).toBeCloseTo(0.2366, 3)
    expect(hi).toBeCloseTo(0.7634, 3)
    expect(wilson(0, 0)).toEqual([0, 1])
  })

  it("stratified paired interval: equal weight per stratum, variances of the means summed", () => {
    const a = [0, 0.5, 1, 0.5] // mean 0.5, variance 1/6
    const b = [0, 0] // mean 0, variance 0
    const [lo, hi] = stratifiedPairedInterval([a, b])
    expect((lo + hi) / 2).toBeCloseTo(mean([0.5, 0]), 9)
    const h = 1.96 * Math.sqrt(1 / 6 / 4 / 4)
    expect(hi - (lo + hi) / 2).toBeCloseTo(h, 9)
    // More tasks with the same spread narrow it; an empty stratum is left out.
    const [lo2, hi2] = stratifiedPairedInterval([[...a, ...a], b, []])
    expect(hi2 - lo2).toBeLessThan(hi - lo)
    expect(stratifiedPairedInterval([])).toEqual([0, 0])
  })
})
