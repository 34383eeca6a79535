import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { evaluationStats, passAtK } from "./pass-at-k.ts"

/** C(n, k) exactly, for checking the product form against the definition. */
const binomial = (n: number, k: number): bigint => {
  if (k < 0 || k > n) return 0n
  let r = 1n
  for (let i = 1; i <= k; i++) r = (r * BigInt(n - k + i)) / BigInt(i)
  return r
}

describe("passAtK (unbiased estimator)", () => {
  it("matches hand-computed values", () => {
    // 1 − C(4,1)/C(5,1) = 1 − 4/5
    expect(passAtK(5, 1, 1)).toBeCloseTo(0.2, 12)
    // 1 − C(3,2)/C(5,2) = 1 − 3/10
    expect(passAtK(5, 2, 2)).toBeCloseTo(0.7, 12)
    // 1 − C(3,2)/C(4,2) = 1 − 3/6
    expect(passAtK(4, 1, 2)).toBeCloseTo(0.5, 12)
    // 1 − C(7,5)/C(10,5) = 1 − 21/252
    expect(passAtK(10, 3, 5)).toBeCloseTo(1 - 21 / 252, 12)
    // 1 − C(14,4)/C(16,4) = 1 − 1001/1820
    expect(passAtK(16, 2, 4)).toBeCloseTo(1 - 1001 / 1820, 12)
  })

  it("is 0 without a resolved sample and 1 when every draw of k holds one", () => {
    expect(passAtK(5, 0, 1)).toBe(0)
    expect(passAtK(5, 0, 5)).toBe(0)
    expect(passAtK(5, 5, 1)).toBe(1)
    // n − c = 2 < k = 3: every 3 of the 4 samples include a resolved one.
    expect(passAtK(4, 2, 3)).toBe(1)
    expect(passAtK(1, 1, 1)).toBe(1)
  })

  it("is undefined (NaN) for k > n, k < 1 or c > n", () => {
    expect(passAtK(3, 1, 4)).toBeNaN()
    expect(passAtK(3, 1, 0)).toBeNaN()
    expect(passAtK(3, 4, 1)).toBeNaN()
  })

  it("pass@1 is the resolved fraction, and pass@k grows with k", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.nat(), (n, cSeed) => {
        const c = cSeed % (n + 1)
        expect(passAtK(n, c, 1)).toBeCloseTo(c / n, 12)
        for (let k = 2; k <= n; k++)
          expect(passAtK(n, c, k)).toBeGreaterThanOrEqual(passAtK(n, c, k - 1) - 1e-12)
      }),
    )
  })

  it("equals 1 − C(n−c, k)/C(n, k) where the binomials overflow doubles", () => {
    const n = 1200
    for (const [c, k] of [
      [3, 100],
      [1, 600],
      [40, 7],
    ] as const) {
      const exact = 1 - Number((binomial(n - c, k) * 10n ** 15n) / binomial(n, k)) / 1e15
      expect(passAtK(n, c, k)).toBeCloseTo(exact, 12)
    }
  })
})

describe("evaluationStats", () => {
  it("averages pass@k over tasks and the resolved rate over episodes", () => {
    const stats = evaluationStats(
      [
        { taskId: "a", samples: 4, resolved: 1, rewardSum: 10 },
        { taskId: "b", samples: 4, resolved: 4, rewardSum: 32 },
        { taskId: "c", samples: 4, resolved: 0, rewardSum: 2 },
      ],
      4,
    )
    expect(stats.resolvedRate).toBeCloseTo(5 / 12, 12)
    expect(stats.rewardMean).toBeCloseTo(44 / 12, 12)
    expect(stats.episodes).toBe(12)
    expect(stats.tasks).toBe(3)
    expect(stats.passAtK.get(1)).toBeCloseTo((0.25 + 1 + 0) / 3, 12)
    expect(stats.passAtK.get(2)).toBeCloseTo((0.5 + 1 + 0) / 3, 12)
    expect(stats.passAtK.get(3)).toBeCloseTo((0.75 + 1 + 0) / 3, 12)
    expect(stats.passAtK.get(4)).toBeCloseTo((1 + 1 + 0) / 3, 12)
    expect(stats.perTask[0]?.passAtK.get(2)).toBeCloseTo(0.5, 12)
  })

  it("leaves a task out of pass@k for k above its scored samples", () => {
    const stats = evaluationStats(
      [
        { taskId: "a", samples: 2, resolved: 1, rewardSum: 1 },
        // One of its two samples failed for infrastructure reasons.
        { taskId: "b", samples: 1, resolved: 1, rewardSum: 1 },
        { taskId: "c", samples: 0, resolved: 0, rewardSum: 0 },
      ],
      2,
    )
    expect(stats.passAtK.get(1)).toBeCloseTo((0.5 + 1) / 2, 12)
    expect(stats.passAtK.get(2)).toBeCloseTo(1, 12)
    expect(stats.tasks).toBe(2)
    expect(stats.resolvedRate).toBeCloseTo(2 / 3, 12)
  })
})
