import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { PpoError } from "./errors.ts"
import { lrFactor, minibatchOrder, mixSeed } from "./schedule.ts"

describe("lrFactor", () => {
  const cosine = { kind: "cosine" as const, warmupSteps: 2, decaySteps: 10, minRatio: 0.1 }

  it("warms up linearly, then follows the cosine to the floor (hand-computed)", () => {
    // Warm-up: (u + 1) / 2. Then p = (u − 2) / 8: u = 2 → 1; u = 6 → p = ½ → 0.1 + 0.9 · ½ =
    // 0.55; u = 4 → p = ¼ → 0.1 + 0.9 · ½ · (1 + cos(π/4)) = 0.868198051534; u ≥ 10 → 0.1.
    expect(lrFactor(0, cosine)).toBe(0.5)
    expect(lrFactor(1, cosine)).toBe(1)
    expect(lrFactor(2, cosine)).toBeCloseTo(1, 14)
    expect(lrFactor(4, cosine)).toBeCloseTo(0.868198051534, 11)
    expect(lrFactor(6, cosine)).toBeCloseTo(0.55, 14)
    expect(lrFactor(10, cosine)).toBeCloseTo(0.1, 14)
    expect(lrFactor(25, cosine)).toBeCloseTo(0.1, 14)
  })

  it("is constant after the warm-up for `constant`, or cosine without decay steps", () => {
    const constant = { ...cosine, kind: "constant" as const }
    expect(lrFactor(0, constant)).toBe(0.5)
    expect(lrFactor(7, constant)).toBe(1)
    expect(lrFactor(7, { ...cosine, decaySteps: 0 })).toBe(1)
    expect(lrFactor(0, { ...constant, warmupSteps: 0 })).toBe(1)
  })

  it("reaches the floor right after the warm-up when the decay span is not longer", () => {
    expect(lrFactor(3, { ...cosine, warmupSteps: 3, decaySteps: 3 })).toBeCloseTo(0.1, 14)
  })

  it("is non-increasing after the warm-up and stays in [minRatio, 1] (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 }),
        fc.integer({ min: 0, max: 50 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (warmupSteps, decaySteps, minRatio) => {
          const s = { kind: "cosine" as const, warmupSteps, decaySteps, minRatio }
          let previous = Number.POSITIVE_INFINITY
          for (let u = warmupSteps; u < warmupSteps + 60; u++) {
            const f = lrFactor(u, s)
            expect(f).toBeLessThanOrEqual(previous + 1e-12)
            expect(f).toBeGreaterThanOrEqual(minRatio - 1e-12)
            expect(f).toBeLessThanOrEqual(1 + 1e-12)
            previous = f
          }
        },
      ),
      { numRuns: 100 },
    )
  })

  it("rejects bad settings", () => {
    expect(() => lrFactor(-1, cosine)).toThrow(PpoError)
    expect(() => lrFactor(0, { ...cosine, minRatio: 2 })).toThrow("minRatio")
    expect(() => lrFactor(0, { ...cosine, warmupSteps: 1.5 })).toThrow("warmupSteps")
  })
})

describe("minibatchOrder", () => {
  it("partitions the indices into near-equal parts, the same for the same seed", () => {
    const parts = minibatchOrder(10, 3, 42)
    expect(parts.map((p) => p.length)).toEqual([4, 3, 3])
    expect(
      parts
        .flat()
        .slice()
        .sort((a, b) => a - b),
    ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    expect(minibatchOrder(10, 3, 42)).toEqual(parts)
    // Another seed, another shuffle (for these seeds).
    expect(minibatchOrder(10, 3, 43).flat()).not.toEqual(parts.flat())
  })

  it("makes no more parts than indices, and none for no indices", () => {
    expect(minibatchOrder(2, 5, 1).map((p) => p.length)).toEqual([1, 1])
    expect(minibatchOrder(0, 3, 1)).toEqual([])
    expect(() => minibatchOrder(3, 0, 1)).toThrow("minibatches")
  })

  it("mixes seeds so that neighbouring updates and epochs shuffle differently", () => {
    expect(mixSeed(0, 1, 0)).not.toBe(mixSeed(0, 1, 1))
    expect(mixSeed(0, 1, 0)).not.toBe(mixSeed(0, 2, 0))
    expect(mixSeed(5, 1, 0)).toBe(mixSeed(5, 1, 0))
  })
})
